"""What a planner sees on a run page while it runs and when it finishes — without reloading.

Real worker, live server, Debian chromium. A marker set on ``window`` survives only if the page is never
reloaded; the results, charts, line items and layout panel must appear by htmx swaps alone, and the
"Cancel run" button and the "queued" text must go away.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in, wait_js

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

LLAMA_8B = {"name": "Llama-3-8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
            "gated_ffn": True, "vocab": 128256, "seq_len": 8192}


def _scenario(team: Any, user: Any, name: str, gpus: int = 64, gpu: str = "H100-SXM") -> Any:
    from planning import services

    services.catalog_load_default()
    workload = services.workload_create(team=team, user=user, name=name, model=dict(LLAMA_8B),
                                        training={"global_batch": 256, "tokens": 1e12, "precision": "bf16"},
                                        parallelism="auto")
    return services.scenario_create(team=team, user=user, name=name, workload=workload,
                                    cluster={"gpu": gpu, "gpus": gpus, "gpus_per_node": 8, "nic_gbps": 400,
                                             "fabric": "infiniband", "topology": "rail-optimized"})


def _start(page: Any, base: str, scenario: Any, button: str) -> None:
    page.goto(f"{base}/scenarios/{scenario.pk}/")
    page.click(button)
    page.wait_for_url(f"{base}/runs/*/")
    page.evaluate("window.__noReload = true")


def test_tco_results_appear_without_reload(live_server: Any, browser: Any, make_user: Any, team: Any,
                                           celery_worker_factory: Any, purge_broker: Any) -> None:
    planner = make_user("planner", team=team, username="rita-results")
    scenario = _scenario(team, planner, "Llama 8B live results")
    celery_worker_factory(concurrency=1, extra_env={"FP_TASK_TEST_DELAY_S": "1.5"})
    base = live_server.url
    page = sign_in(browser, base, planner.username)

    _start(page, base, scenario, "#run-tco")
    assert page.locator("#run-status").get_attribute("data-status") in ("queued", "running")
    assert page.locator("#cancel-run").is_visible()
    shot(page, "10-run-queued")

    page.wait_for_selector("#run-results", timeout=120_000)
    assert page.evaluate("window.__noReload === true"), "the results must arrive without a page reload"
    assert page.locator("#run-status").get_attribute("data-status") == "succeeded"
    # what went away: the cancel button, any "queued" wording, the reload hint
    assert page.locator("#cancel-run").count() == 0
    body = page.locator("main").inner_text()
    assert "queued." not in body.lower() and "reload" not in body.lower()
    # what arrived: headline figures, a drawn chart, the cost line items, the layout used
    assert page.locator("#run-results dd").count() >= 8
    wait_js(page, "window.fpCharts && window.fpCharts['chart-step']")
    assert page.locator("#line-items tbody tr").count() >= 5
    assert page.locator("#layout-panel #layout-chosen").inner_text().startswith("TP") or \
        "DP" in page.locator("#layout-panel #layout-chosen").inner_text()
    assert page.locator("#export-run-csv").is_visible()
    shot(page, "11-run-succeeded")
    assert_no_axe_violations(page)
    assert page.js_errors == [], page.js_errors
    assert page.missing == [], page.missing  # no 404s (favicon included)


def test_search_layouts_shows_layout_alternatives_and_memory(live_server: Any, browser: Any, make_user: Any,
                                                             team: Any, celery_worker_factory: Any,
                                                             purge_broker: Any) -> None:
    planner = make_user("planner", team=team, username="sam-search")
    scenario = _scenario(team, planner, "Llama 8B layout search")
    celery_worker_factory(concurrency=1, extra_env={"FP_TASK_TEST_DELAY_S": "1.0"})
    base = live_server.url
    page = sign_in(browser, base, planner.username)

    _start(page, base, scenario, "#run-search")
    page.wait_for_selector("#layout-panel", timeout=120_000)
    assert page.evaluate("window.__noReload === true")
    assert page.locator("#cancel-run").count() == 0
    chosen = page.locator("#layout-chosen").inner_text()
    assert "DP" in chosen
    evaluated = page.locator("#layout-evaluated").inner_text()
    assert "layouts evaluated" in evaluated and "fit in memory" in evaluated
    memory = page.locator("#layout-memory").inner_text()
    assert "GiB HBM" in memory and "GB usable" in memory  # memory per GPU against the H100's 80 GiB
    rows = page.locator("#layout-alternatives tbody tr")
    assert rows.count() >= 1
    first = rows.first.inner_text()
    assert "slower" in first or "ties" in first  # why it loses, in words
    shot(page, "12-search-layouts")
    assert_no_axe_violations(page)
    assert page.js_errors == [], page.js_errors
