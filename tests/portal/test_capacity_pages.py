"""Capacity-plan pages (issue #14): list, run, follow, read the results (stacked utilization chart with the
P10-P90 band, shortfall, recommendation); team-scoped."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from django.urls import reverse

from tests.simulations.api.test_capacity_plans import PLAN

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan_for(db: Any) -> Any:
    def _make(team: Any, user: Any) -> Any:
        from planning.services.capacity_plans import capacity_plan_create

        return capacity_plan_create(team=team, user=user, name=f"{team.slug} plan", document=copy.deepcopy(PLAN))

    return _make


def test_run_follow_and_read_a_capacity_plan(client: Any, make_user: Any, team: Any, plan_for: Any) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    user = make_user("planner", team=team)
    plan = plan_for(team, user)
    client.force_login(user)
    listing = client.get(reverse("capacity-plans")).content.decode()
    assert plan.name in listing and "never run" in listing
    r = client.post(reverse("capacity-plan-run", args=[plan.pk]), {"replications": "2"})
    assert r.status_code == 302
    run = SimulationRun.objects.get()
    assert r["Location"] == reverse("capacity-run", args=[run.pk]) and run.kind == "fleet"
    assert run.params == {"replications": 2}
    waiting = client.get(r["Location"]).content.decode()
    assert 'http-equiv="refresh"' in waiting and "Cancel run" in waiting
    services.run_execute(run_id=run.pk)
    html = client.get(r["Location"]).content.decode()
    assert 'http-equiv="refresh"' not in html
    assert "Purchase recommendation" in html and "<strong>H100 now</strong>" in html
    assert re.search(r'id="shortfall">\d+', html)
    spec = json.loads(re.search(r'<script id="chart-util-0" type="application/json">(.*?)</script>', html, re.S)
                      .group(1))
    labels = [d["label"] for d in spec["datasets"]]
    assert labels == ["Productive", "Lost to failures and repair", "Idle", "Allocated P10", "Allocated P90"]
    assert spec["stacked"] is True and len(spec["labels"]) == 60
    assert 'id="capacity-jobs"' in html and "missed" in html and 'id="capacity-quarters"' in html
    assert 'id="gantt-1"' in html and "Job timeline" in html and "#c0392b" in html  # the missed job is red


def test_other_teams_and_viewers(client: Any, make_user: Any, team: Any, other_team: Any, plan_for: Any) -> None:
    owner = make_user("planner", team=team)
    plan = plan_for(team, owner)
    outsider = make_user("admin", team=other_team)
    client.force_login(outsider)
    assert plan.name not in client.get(reverse("capacity-plans")).content.decode()
    assert client.post(reverse("capacity-plan-run", args=[plan.pk]), {}).status_code == 404
    viewer = make_user("viewer", team=team)
    client.force_login(viewer)
    assert plan.name in client.get(reverse("capacity-plans")).content.decode()
    assert client.post(reverse("capacity-plan-run", args=[plan.pk]), {}).status_code == 403


def test_bad_replications_is_a_message_not_a_500(client: Any, make_user: Any, team: Any, plan_for: Any) -> None:
    user = make_user("planner", team=team)
    plan = plan_for(team, user)
    client.force_login(user)
    r = client.post(reverse("capacity-plan-run", args=[plan.pk]), {"replications": "100000"}, follow=True)
    assert r.status_code == 200
    assert "params.replications" in r.content.decode()
