"""The pages that draw the charts of issue #24 item 5 / #23 item 6: the compare page names runs by their short
labels and draws the tornado for its baseline, the run page shows its step breakdown as a labelled bar with a
table, and the capacity-plan run page loads the chart code its utilization charts need (without it the
"GPUs per day" canvases stayed empty)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.test_pages import login
from tests.simulations.api.test_capacity_plans import PLAN

pytestmark = pytest.mark.django_db

CHART_JS = ("portal/vendor/chartjs/chart.umd.min.js", "portal/js/charts.js")


def _spec(html: str, chart_id: str) -> dict[str, Any]:
    found = re.search(rf'<script id="{chart_id}" type="application/json">(.*?)</script>', html, re.S)
    assert found, chart_id
    return dict(json.loads(found.group(1)))


def test_compare_names_runs_by_what_differs_and_draws_the_baselines_tornado(
        client: Any, make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> None:
    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    runs = [finished_run(scenario, planner, monte_carlo=20, nic_gbps=s, fabric=f)
            for f in ("infiniband", "roce") for s in (200, 400)]
    login(client, planner)
    html = client.get(reverse("compare"), {"runs": ",".join(str(r.pk) for r in runs),
                                           "baseline": runs[3].pk}).content.decode()
    tco = _spec(html, "chart-tco")
    assert tco["labels"] == ["200G IB", "400G IB", "200G RoCE", "400G RoCE baseline"]
    assert tco["tick_lines"][3] == ["400G", "RoCE", "baseline"] and tco["all_ticks"] is True
    assert "nic_gbps=" not in json.dumps(tco)
    assert _spec(html, "chart-mfu").get("begin_at_zero", True) is True
    tornado = _spec(html, "chart-tornado")
    assert "400G RoCE baseline" in tornado["title"]
    assert not any(label.startswith(("costs.", "cluster.")) for label in tornado["labels"]), tornado["labels"]
    assert any(label.endswith("unit price") for label in tornado["labels"]), tornado["labels"]
    assert tornado["begin_at_zero"] is False and 'class="badge badge-cut axis-cut"' in html  # cut, and marked
    # the table's columns name the runs as the charts do (the full override text as the link's title)
    head = html.split('id="compare-table"')[1].split("</thead>")[0]
    assert f'title="#{runs[2].pk} nic_gbps=200, fabric=roce">#{runs[2].pk} 200G RoCE</a>' in head


def test_run_page_step_breakdown_is_a_bar_with_its_table(client: Any, make_user: Any, team: Any,
                                                         scenario_for: Any, finished_run: Any) -> None:
    from simulations import metrics
    from simulations.results import performance_of

    planner = make_user("planner", team=team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    spec = _spec(html, "chart-step")
    assert spec["horizontal"] is True and spec["stacked"] is True and spec["segment_labels"] is True
    breakdown = performance_of(run.result)["breakdown_s"]
    drawn = {k: v for k, v in breakdown.items() if v > 0}
    assert [d["label"] for d in spec["datasets"]] == [dict(metrics.BREAKDOWN)[k] for k in drawn]
    table = re.search(r'<table class="data compact" id="breakdown-table">(.*?)</table>', html, re.S)
    assert table, "the breakdown table sits beside the bar"
    rows = re.findall(r'<tr data-term="([a-z_]+)">.*?data-value="([0-9.e-]+)".*?data-value="([0-9.e-]+)"',
                      table.group(1), re.S)
    assert [key for key, _, _ in rows] == list(drawn)
    total = sum(drawn.values())
    for key, seconds, share in rows:
        assert float(seconds) == pytest.approx(drawn[key])
        assert float(share) == pytest.approx(drawn[key] / total)
    assert f"<i style=\"background: #2456d6\"></i>{dict(metrics.BREAKDOWN)[next(iter(drawn))]}" in table.group(1)


def test_capacity_run_page_loads_its_chart_code_and_data(client: Any, make_user: Any, team: Any) -> None:
    from planning.services.capacity_plans import capacity_plan_create
    from simulations import services
    from simulations.services.capacity_plans import capacity_plan_submit

    user = make_user("planner", team=team)
    doc = copy.deepcopy(PLAN)
    doc["clusters"].append({"name": "a100", "gpu": "A100-80GB", "gpus": 32})
    plan = capacity_plan_create(team=team, user=user, name="two clusters", document=doc)
    run = capacity_plan_submit(plan=plan, user=user, params={"replications": 2, "search": False})
    assert services.run_execute(run_id=run.pk).status == "succeeded"
    client.force_login(user)
    html = client.get(reverse("capacity-run", args=[run.pk])).content.decode()
    for script in CHART_JS:  # the canvases are drawn by these; without them both charts stayed empty
        assert f'src="/static/{script}"' in html, script
    for i, cluster in enumerate(("h100", "a100")):
        spec = _spec(html, f"chart-util-{i}")
        assert spec["title"] == f"{cluster}: GPUs per day"
        assert f'data-chart="chart-util-{i}"' in html
        assert len(spec["labels"]) == 60
        areas = spec["datasets"][:3]
        assert [d["fill"] for d in areas] == ["origin", "-1", "-1"]  # stacked areas, each over the one below
        for d in spec["datasets"]:
            assert len(d["data"]) == 60 and all(isinstance(v, int | float) for v in d["data"]), d["label"]
        capacity = {"h100": 64, "a100": 32}[cluster]
        # productive + lost + idle cover the cluster's GPUs on a day it is in service (failures are off)
        assert sum(d["data"][30] for d in areas) == pytest.approx(capacity, abs=0.5)
        assert max(spec["datasets"][0]["data"]) > 0


def test_utilization_charts_follow_the_plans_cluster_order() -> None:
    """A JSON column may hand the timeline back with its keys reordered (PostgreSQL's jsonb sorts them): the
    charts keep the plan's order."""
    from portal.views.capacity import utilization_charts

    def series(v: float) -> dict[str, Any]:
        return {k: {"p10": [v], "p50": [v], "p90": [v]} for k in ("allocated", "productive", "failed", "idle")}

    result = {"plan": {"clusters": ["zeta", "alpha"]},
              "summary": {"timeline": {"alpha": series(1.0), "zeta": series(2.0)}}}
    specs = utilization_charts(result)
    assert [s["title"] for s in specs] == ["zeta: GPUs per day", "alpha: GPUs per day"]
    assert [s["id"] for s in specs] == ["chart-util-0", "chart-util-1"]
    assert specs[0]["datasets"][0]["data"] == [2.0]


def test_compare_marks_changes_within_the_engines_error_on_differences(
        client: Any, make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> None:
    """A change smaller than the error on differences (error_bands.json) is greyed and marked ≈; the note says
    how large that error is; the API says the same per run (beyond_model_error)."""
    import math

    from engine.performance.error_bands import difference_error
    from simulations import reports

    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    runs = [finished_run(scenario, planner, monte_carlo=0, nic_gbps=s) for s in (400, 800)]
    login(client, planner)
    html = client.get(reverse("compare"), {"runs": ",".join(str(r.pk) for r in runs),
                                           "baseline": runs[0].pk}).content.decode()
    limit = difference_error()
    assert limit is not None
    assert f"±{(math.exp(limit) - 1) * 100:.1f}%" in html
    data = reports.compare_runs(runs=runs, baseline=runs[0])
    step = next(r for r in data["rows"] if r["metric"].endswith("step_time_s"))
    base, other = step["values"][str(runs[0].pk)], step["values"][str(runs[1].pk)]
    within = abs(math.log(other / base)) <= limit
    assert step["beyond_model_error"][str(runs[1].pk)] is (not within)
    assert ("delta-within" in html) is any(
        v is False for row in data["rows"] for v in row["beyond_model_error"].values()
        if row["metric"].rsplit(".", 1)[-1] in ("step_time_s", "mfu", "time_to_train_days", "run_cost_usd"))
