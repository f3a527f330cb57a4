"""The run page explains its prediction term by term (issue #21: explain(scenario) on the run page)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from engine.performance.explain import explain
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db


def test_a_finished_run_links_to_every_term_of_its_layout(client: Any, make_user: Any, team: Any,
                                                          scenario_for: Any, finished_run: Any) -> None:
    planner = make_user("planner", team=team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    login(client, planner)
    assert reverse("run-explain", args=[run.pk]) in client.get(reverse("run-detail", args=[run.pk])).content.decode()
    html = client.get(reverse("run-explain", args=[run.pk])).content.decode()
    # the page shows the run's own layout and the engine's terms for it, each with its unit
    layout = run.result["performance"]["parallelism"]
    direct = explain(run.input_snapshot["document"], catalog=run.input_snapshot["catalog_values"], layout=layout)
    assert direct["step_time_s"] == pytest.approx(run.result["performance"]["step_time_s"], rel=1e-9)
    assert 'id="explain-terms"' in html and 'id="explain-groups"' in html
    for term in ("layer.", "step.", "zero3.", "memory.", "tensor_parallel."):
        assert re.search(rf'class="mono">{re.escape(term)}', html), term
    assert "<td>s</td>" in html and "<td>bytes</td>" in html


def test_nothing_to_explain_for_a_run_without_a_fitting_result(client: Any, make_user: Any, team: Any,
                                                               scenario_for: Any) -> None:
    from simulations import services as sim
    from simulations.models import RunKind

    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    from planning import services as planning

    doc, version, values = planning.scenario_resolve(scenario=scenario)
    run = sim.run_create(team=team, user=planner, kind=RunKind.PREDICT, document=doc, version=version,
                         values=values, scenario=scenario, overrides={}, label="queued")
    login(client, planner)
    html = client.get(reverse("run-explain", args=[run.pk])).content.decode()
    assert 'id="explain-none"' in html


def test_another_team_cannot_read_the_explanation(client: Any, make_user: Any, team: Any, other_team: Any,
                                                  scenario_for: Any, finished_run: Any) -> None:
    owner = make_user("planner", team=team)
    run = finished_run(scenario_for(team, owner), owner, monte_carlo=0)
    login(client, make_user("planner", team=other_team))
    assert client.get(reverse("run-explain", args=[run.pk])).status_code == 404
