"""End-to-end: Playwright (sync API) driving Debian chromium against a live server and a real Celery worker.

Needs full mode (PostgreSQL + Redis): marked ``integration`` and ``browser``. Screenshots of the key pages go
to ``test-artifacts/screenshots/``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in, wait_js

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]


def test_plan_sweep_compare_export(live_server: Any, browser: Any, make_user: Any, team: Any,
                                   celery_worker_factory: Any, purge_broker: Any) -> None:
    from planning import services

    services.catalog_load_default()
    planner = make_user("planner", team=team, username="pat-planner")
    viewer = make_user("viewer", team=team, username="val-viewer")
    celery_worker_factory(concurrency=2, extra_env={"FP_TASK_TEST_DELAY_S": "0.6"})
    base = live_server.url

    # --- sign in, dashboard ---------------------------------------------------------------------------
    page = sign_in(browser, base, planner.username)
    assert page.locator("h1", has_text="Dashboard").is_visible()
    shot(page, "01-dashboard-empty")

    # --- scenario builder with the live estimate --------------------------------------------------------
    page.goto(f"{base}/scenarios/new/")
    page.wait_for_selector("#est-step-time")  # the estimate loads for the default preset
    page.select_option("select[name=preset]", "llama3-8b")
    page.fill("input[name=name]", "Llama 8B fabric study")
    page.fill("input[name=gpus]", "256")
    page.fill("input[name=global_batch]", "512")
    page.fill("input[name=tokens_b]", "1000")
    wait_js(page, "document.querySelector('#est-step-time') && document.querySelector('#estimate-result')"
                   " && document.querySelector('input[name=gpus]').value === '256'")
    page.wait_for_timeout(1200)  # let the debounced preview settle
    assert page.locator("#est-mfu").inner_text().endswith("%")
    assert page.locator("#est-run-cost").inner_text().startswith("$")
    shot(page, "02-scenario-builder")
    page.click("button[type=submit]:has-text('Create scenario')")
    page.wait_for_url(f"{base}/scenarios/*/")
    assert page.locator("h1", has_text="Llama 8B fabric study").is_visible()
    scenario_url = page.url

    # --- sweep: link speeds x fabrics ------------------------------------------------------------------
    for speed in ("200", "400", "800"):
        page.check(f"#sweep-form input[name=nic_gbps][value='{speed}']")
    page.check("#sweep-form input[name=fabric][value=infiniband]")
    page.check("#sweep-form input[name=fabric][value=roce]")
    shot(page, "03-scenario-detail")
    page.click("#sweep-form button[type=submit]")
    page.wait_for_url(f"{base}/sweeps/*/")
    page.evaluate("window.__noReload = true")
    page.wait_for_selector("#sweep-progress")
    first = int(page.locator("#sweep-progress").get_attribute("data-percent") or 0)
    assert first < 100
    shot(page, "04-sweep-running")
    page.wait_for_selector("#sweep-progress[data-finished='1']", timeout=120_000)
    assert page.locator("#sweep-percent").inner_text() == "100%"
    assert page.evaluate("window.__noReload === true"), "progress must update without a page reload"
    assert page.locator("#sweep-progress .badge-succeeded").count() == 6
    shot(page, "05-sweep-done")

    # --- runs list ----------------------------------------------------------------------------------------
    page.goto(f"{base}/runs/")
    assert page.locator("#runs-table tbody tr").count() == 6
    shot(page, "06-runs")
    page.go_back()

    # --- comparison with charts ---------------------------------------------------------------------------
    page.click("#open-comparison")
    page.wait_for_url(f"{base}/compare/?sweep=*")
    wait_js(page, "window.fpCharts && Object.keys(window.fpCharts).length >= 5")
    charts = page.evaluate("""() => Object.fromEntries(Object.entries(window.fpCharts).map(([id, c]) => [id, {
        datasets: c.data.datasets.length, labels: c.data.labels.length,
        width: c.canvas.width, height: c.canvas.height,
        painted: (() => { const d = c.canvas.getContext('2d').getImageData(0, 0, c.canvas.width, c.canvas.height).data;
                          let n = 0; for (let i = 3; i < d.length; i += 4) { if (d[i]) n++; } return n; })()
    }]))""")
    assert charts["chart-mfu"]["datasets"] == 2 and charts["chart-mfu"]["labels"] == 3  # 2 fabrics x 3 speeds
    assert charts["chart-ttt"]["datasets"] == 2 and charts["chart-ttt"]["labels"] == 3
    assert charts["chart-tco"]["labels"] == 6 and charts["chart-tco"]["datasets"] >= 3
    assert charts["chart-step"]["labels"] == 6 and charts["chart-step"]["datasets"] >= 2
    assert charts["chart-tornado"]["datasets"] == 2 and charts["chart-tornado"]["labels"] >= 3
    for cid, info in charts.items():
        assert info["width"] > 0 and info["height"] > 0 and info["painted"] > 500, (cid, info)
    assert page.locator("#compare-table tbody tr").count() >= 8
    assert page.locator("#compare-table thead th").count() == 7  # metric + 6 runs
    # the default baseline is the scenario's own configuration (400G InfiniBand), not the first sweep run
    assert "nic_gbps=400" in page.locator("#baseline-sel option:checked").inner_text()
    assert "fabric=infiniband" in page.locator("#baseline-sel option:checked").inner_text()
    shot(page, "07-comparison")

    # --- CSV export ---------------------------------------------------------------------------------------
    with page.expect_download() as dl:
        page.click("#export-csv")
    text = Path(dl.value.path()).read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    assert header[0] == "metric"
    assert sum(1 for h in header if h.startswith("#")) == 6 and any("(baseline)" in h for h in header)
    # each of the 5 other runs: its change in the metric's unit and as % or percentage points (issue #24)
    assert sum(1 for h in header if h.startswith("Δ ")) == 5
    assert sum(1 for h in header if h.startswith("change ")) == 5
    metrics = {r[0]: r for r in rows[1:]}
    assert "tco.run_cost_usd" in metrics and "performance.mfu" in metrics
    baseline_col = next(i for i, h in enumerate(header) if "(baseline)" in h)
    assert float(metrics["tco.run_cost_usd"][baseline_col]) > 0
    assert metrics["performance.mfu"][header.index("change_in")] == "pt"  # shares change in points

    # --- printable view ----------------------------------------------------------------------------------
    page.click("#printable")
    wait_js(page, "window.fpCharts && Object.keys(window.fpCharts).length >= 5")
    page.emulate_media(media="print")
    assert not page.locator(".topbar").is_visible()
    shot(page, "08-comparison-print")
    page.emulate_media(media="screen")
    assert page.js_errors == [], page.js_errors
    page.emulate_media(media="screen")
    assert_no_axe_violations(page)

    # --- a viewer cannot run or edit --------------------------------------------------------------------
    vpage = sign_in(browser, base, viewer.username)
    vpage.goto(scenario_url)
    assert vpage.locator("#run-tco").count() == 0 and vpage.locator("#sweep-form").count() == 0
    csrf = next(c["value"] for c in vpage.context.cookies() if c["name"] == "csrftoken")
    response = vpage.request.post(scenario_url + "run/", form={"kind": "tco"},
                                  headers={"X-CSRFToken": csrf, "Referer": scenario_url})
    assert response.status == 403
    denied = vpage.goto(f"{base}/scenarios/new/")
    assert denied is not None and denied.status == 403
    assert vpage.locator("text=You can't do that here").is_visible()
    shot(vpage, "09-viewer-forbidden")
