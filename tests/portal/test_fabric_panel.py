"""The run page shows the cluster fabric the result assumed: the one sized topology both the performance and the
cost model read (issue #10), tier by tier, with the routing and where its share came from."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db


def _tiers(html: str) -> list[list[str]]:
    table = re.search(r'<table class="data compact" id="fabric-tiers">(.*?)</table>', html, re.S)
    assert table, html[:2000]
    body = re.search(r"<tbody>(.*?)</tbody>", table.group(1), re.S).group(1)  # type: ignore[union-attr]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_run_page_shows_the_fabric_of_the_result(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                                 finished_run: Any) -> None:
    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner, gpus=4096, topology="fat-tree", oversubscription=2.0), planner)
    fabric = run.result["performance"]["fabric"]
    login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="fabric-panel"' in html
    summary = re.search(r'id="fabric-summary">([^<]*)<', html).group(1)  # type: ignore[union-attr]
    assert f"{fabric['tiers']}-tier fat-tree" in summary and "InfiniBand" in summary
    assert "adaptive routing" in summary and "shipped flow-simulation tables" in summary
    rows = _tiers(html)
    assert len(rows) == fabric["tiers"]
    names = ("leaf", "spine", "core")
    links = ("node_leaf", "leaf_spine", "spine_core")
    for row, name, link in zip(rows, names, links, strict=False):
        assert row[0] == name.capitalize()
        assert row[1].replace(",", "") == str(fabric["switches"][name])
        assert row[2].replace(",", "") == str(fabric["links"][link])
    # the oversubscribed leaf as built from whole switch ports (what the cost and speed models both read)
    leaf = fabric["oversubscription"]["leaf"]
    assert 2.0 <= leaf < 2.1
    assert rows[0][3] == f"{leaf:.2f}".rstrip("0").rstrip(".") + ":1"
    assert fabric["switch_model"] in html


def test_no_fabric_panel_without_a_result(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                          finished_run: Any) -> None:
    from simulations.models import RunStatus

    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner)
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, result=None)
    login(client, planner)
    assert 'id="fabric-panel"' not in client.get(reverse("run-detail", args=[run.pk])).content.decode()
