"""Charts that read right in a browser (issue #24 item 5, #23 item 6).

* A compare page of a 12-run sweep (link speed x fabric x oversubscription) names every run by its short
  label ("400G RoCE 2:1", the baseline "400G IB 1:1 baseline"), and Chart.js draws all 12 tick labels of each
  per-run chart, unrotated; MFU is drawn from zero; the tornado is the baseline's, in the registry's words, and
  its cut axis says so.
* A capacity-plan run page of a two-cluster plan draws both "GPUs per day" charts with data (they were empty:
  the page never loaded the chart code).

Runs execute in this process (``run_execute``), so no worker is needed; the pages are served live.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in, wait_js

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

MODEL = {"name": "Llama-3-8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
         "gated_ffn": True, "vocab": 128256, "seq_len": 8192}
CLUSTER = {"gpu": "H100-SXM", "gpus": 256, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400,
           "fabric": "infiniband", "topology": "rail-optimized", "oversubscription": 1.0}
SPEEDS, FABRICS, RATIOS = (200, 400, 800), ("infiniband", "roce"), (1, 2)
WORDS = {"infiniband": "IB", "roce": "RoCE"}
PER_RUN_CHARTS = ("chart-tco", "chart-step", "chart-mc-run", "chart-mc-time")

# each chart's labels, its drawn ticks (after Chart.js's auto-skip) and rotation, its value axis' minimum
READ_CHARTS = """() => Object.fromEntries(Object.entries(window.fpCharts).map(([id, c]) => {
    const horizontal = c.options.indexAxis === 'y';
    const cat = horizontal ? c.scales.y : c.scales.x, val = horizontal ? c.scales.x : c.scales.y;
    return [id, {labels: c.data.labels, ticks: cat.ticks.length, rotation: cat.labelRotation || 0,
                 min: val.min, title: val.options.title.text, datasets: c.data.datasets.length,
                 points: c.data.datasets.reduce((n, d) => n + d.data.filter(v => v !== null).length, 0)}];
}))"""


def _expected_labels() -> set[str]:
    """The 12 labels, written from the axes by hand: speed, fabric, ratio; the scenario's own configuration
    (400G InfiniBand 1:1) is the baseline."""
    out = set()
    for speed, fabric, ratio in itertools.product(SPEEDS, FABRICS, RATIOS):
        label = f"{speed}G {WORDS[fabric]} {ratio}:1"
        out.add(label + " baseline" if (speed, fabric, ratio) == (400, "infiniband", 1) else label)
    return out


def test_compare_of_a_12_run_sweep_shows_every_label(live_server: Any, browser: Any, make_user: Any, team: Any,
                                                      purge_broker: Any) -> None:
    from planning import services as planning
    from simulations import services
    from simulations.models import SimulationRun

    planning.catalog_load_default()
    planner = make_user("planner", team=team, username="chad-charts")
    workload = planning.workload_create(team=team, user=planner, name="Llama-3-8B", model=dict(MODEL),
                                        training={"global_batch": 512, "tokens": 1e12, "precision": "bf16"},
                                        parallelism="auto")
    scenario = planning.scenario_create(team=team, user=planner, name="Llama 8B charts", workload=workload,
                                        cluster=dict(CLUSTER), costs={"usd_per_kwh": 0.08, "pue": 1.3})
    sweep = services.sweep_submit(scenario=scenario, user=planner, kind="tco",
                                  axes={"cluster.nic_gbps": list(SPEEDS), "cluster.fabric": list(FABRICS),
                                        "cluster.oversubscription": list(RATIOS)},
                                  params={"monte_carlo": 50, "sensitivity": True})
    run_ids = list(SimulationRun.objects.filter(sweep=sweep).order_by("pk").values_list("pk", flat=True))
    assert len(run_ids) == 12
    for pk in run_ids:
        services.run_execute(run_id=pk)
    assert SimulationRun.objects.filter(sweep=sweep, status="succeeded").count() == 12

    base = live_server.url
    page = sign_in(browser, base, planner.username)
    page.goto(f"{base}/compare/?sweep={sweep.pk}")
    wait_js(page, "window.fpCharts && ['chart-mfu', 'chart-tco', 'chart-step', 'chart-mc-run', 'chart-tornado']"
                  ".every(id => window.fpCharts[id])")
    charts = page.evaluate(READ_CHARTS)
    expected = _expected_labels()
    for cid in PER_RUN_CHARTS:
        info = charts[cid]
        assert set(info["labels"]) == expected, (cid, info["labels"])
        assert info["ticks"] == 12, (cid, info)  # every label drawn: none skipped
        assert info["rotation"] == 0, (cid, info)  # short labels, drawn across, one word a line
        assert info["min"] == 0, (cid, info)  # value axes from zero
    assert not any("=" in label for label in charts["chart-tco"]["labels"])
    assert charts["chart-mfu"]["min"] == 0 and charts["chart-ttt"]["min"] == 0
    assert charts["chart-mfu"]["points"] == 12  # 4 lines (fabric x ratio) x 3 link speeds
    tornado = charts["chart-tornado"]
    assert not any(str(label).startswith("costs.") for label in tornado["labels"]), tornado["labels"]
    assert "does not start at zero" in tornado["title"]  # the cut axis says so on the chart
    assert "400G IB 1:1 baseline" in page.locator("#card-chart-tornado h2").inner_text()
    assert page.locator("#card-chart-tornado .axis-cut").is_visible()
    # the per-run charts span the page, so 12 labels sit side by side
    card = page.locator("#card-chart-tco").bounding_box()
    assert card is not None and card["width"] > 1000, card
    shot(page, "60-compare-12-runs")
    assert_no_axe_violations(page)
    assert page.js_errors == [], page.js_errors


def test_capacity_plan_page_draws_its_utilization_charts(live_server: Any, browser: Any, make_user: Any, team: Any,
                                                          purge_broker: Any) -> None:
    from planning import services as planning
    from planning.services.capacity_plans import capacity_plan_create
    from simulations import services
    from simulations.services.capacity_plans import capacity_plan_submit
    from tests.simulations.api.test_capacity_plans import PLAN

    planning.catalog_load_default()
    user = make_user("planner", team=team, username="cara-capacity")
    doc = copy.deepcopy(PLAN)
    doc["clusters"].append({"name": "a100", "gpu": "A100-80GB", "gpus": 32})
    plan = capacity_plan_create(team=team, user=user, name="Two clusters", document=doc)
    run = capacity_plan_submit(plan=plan, user=user, params={"replications": 2, "search": False})
    assert services.run_execute(run_id=run.pk).status == "succeeded"

    base = live_server.url
    page = sign_in(browser, base, user.username)
    page.goto(f"{base}/capacity/runs/{run.pk}/")
    wait_js(page, "window.fpCharts && window.fpCharts['chart-util-0'] && window.fpCharts['chart-util-1']")
    info = page.evaluate("""() => ['chart-util-0', 'chart-util-1'].map(id => {
        const c = window.fpCharts[id];
        const d = c.canvas.getContext('2d').getImageData(0, 0, c.canvas.width, c.canvas.height).data;
        let painted = 0; for (let i = 3; i < d.length; i += 4) { if (d[i]) painted++; }
        return {days: c.data.labels.length, datasets: c.data.datasets.map(s => s.label),
                points: c.data.datasets.map(s => s.data.length),
                productive: Math.max(...c.data.datasets[0].data), yMax: c.scales.y.max, painted: painted,
                drawn: c.canvas.getAttribute('data-drawn')};
    })""")
    for chart in info:
        assert chart["drawn"] == "1" and chart["days"] == 60, chart
        assert chart["datasets"][:3] == ["Productive", "Lost to failures and repair", "Idle"], chart
        assert all(n == 60 for n in chart["points"]), chart
        assert chart["productive"] > 0 and chart["yMax"] > 0, chart
        assert chart["painted"] > 5000, chart  # areas painted, not an empty frame
    assert page.locator("h2", has_text="h100: GPUs per day").is_visible()
    assert page.locator("h2", has_text="a100: GPUs per day").is_visible()
    shot(page, "61-capacity-utilization")
    assert_no_axe_violations(page)
    assert page.js_errors == [], page.js_errors
