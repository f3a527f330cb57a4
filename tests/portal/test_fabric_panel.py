"""The network as planners see it: the run page shows the cluster fabric the result assumed (the one sized
topology both the performance and the cost model read, issue #10), tier by tier, with the routing and where its
share came from; the link-speed charts split their lines by the swept network axes."""

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
    assert "Adaptive routing" in summary and "shipped flow-simulation tables" in summary  # the Routing enum's label
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


class _Run:
    def __init__(self, pk: int, mfu: float, **cluster: Any) -> None:
        self.pk, self.label, self.kind = pk, "", "tco"
        self.result = {"performance": {"mfu": mfu, "fits": True}}
        self.input_snapshot = {"document": {"cluster": {"gpu": "H100-SXM", "gpus": 1024, **cluster}}}


def test_link_speed_charts_split_lines_by_the_swept_network_axes() -> None:
    """A sweep over routing (or topology, oversubscription) draws one line per value, named; where runs share a
    point on the chart the best value is drawn (higher MFU)."""
    from portal.charts import _series_by_fabric

    runs = [_Run(i, mfu, nic_gbps=speed, fabric="roce", routing=routing)
            for i, (speed, routing, mfu) in enumerate([(200, "ecmp", 0.30), (400, "ecmp", 0.35),
                                                        (200, "adaptive", 0.36), (400, "adaptive", 0.40)])]
    spec = _series_by_fabric(runs, "performance.mfu")
    assert spec is not None and spec["labels"] == ["200G", "400G"]
    lines = {d["label"]: d["data"] for d in spec["datasets"]}
    assert lines == {"Ethernet (RoCE) · adaptive": [0.36, 0.40], "Ethernet (RoCE) · ecmp": [0.30, 0.35]}
    same_point = [_Run(1, 0.30, nic_gbps=400, fabric="roce"), _Run(2, 0.45, nic_gbps=400, fabric="roce")]
    spec = _series_by_fabric(same_point, "performance.mfu")
    assert spec is not None and spec["datasets"][0]["data"] == [0.45]
    over = [_Run(1, 0.40, nic_gbps=400, fabric="infiniband", oversubscription=1.0),
            _Run(2, 0.37, nic_gbps=400, fabric="infiniband", oversubscription=2.0)]
    spec = _series_by_fabric(over, "performance.mfu")
    assert spec is not None and {d["label"] for d in spec["datasets"]} == {"InfiniBand · 1:1", "InfiniBand · 2:1"}
