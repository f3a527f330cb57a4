"""The fleet calibration page in a browser (issue #16): upload nccl-tests output and a step log through the
forms, fit, and see the fitted values and the predicted-vs-measured charts drawn (SYNTHETIC demo data).

Imports and fits are jobs on a real worker (issue #23): the page follows them and reloads itself when they end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in, wait_js

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "calibration"


def test_calibration_page_upload_fit_and_charts(live_server: Any, browser: Any, make_user: Any, team: Any,
                                                celery_worker_factory: Any, purge_broker: Any) -> None:
    from planning import services

    celery_worker_factory(queues="default,simulations", concurrency=1)
    services.catalog_load_default()
    planner = make_user("planner", team=team, username="cal-planner")
    fleet = services.fleet_create(team=team, user=planner, name="A100 pod", server_model="HGX-A100-80GB",
                                  server_count=8, nic_gbps=200, fabric="infiniband", topology="fat-tree")
    manifest = json.loads((EXAMPLES / "manifest.json").read_text(encoding="utf-8"))
    run = next(r for r in manifest["runs"] if r["id"] == "llama7b-32gpu-bf16")
    base = live_server.url
    page = sign_in(browser, base, planner.username)
    page.goto(f"{base}/fleets/")
    page.click(f"a[href='/fleets/{fleet.pk}/calibration/']")
    page.wait_for_url(f"{base}/fleets/{fleet.pk}/calibration/")
    assert "Not calibrated yet" in page.content()

    page.select_option("select[name=kind]", "nccl-tests")
    page.set_input_files("input[name=file]", str(EXAMPLES / "a100_all_reduce_32ranks.txt"))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("#uploads tr[data-status=ready]", timeout=60_000)  # its import job ran; the page reloaded
    page.select_option("select[name=kind]", "step-log")
    page.set_input_files("input[name=file]", str(EXAMPLES / run["file"]))
    scenario = {k: run["scenario"][k] for k in ("model", "training", "parallelism")}
    page.fill("textarea[name=scenario]", json.dumps({**scenario, "cluster": {"gpus": 32}}))
    page.click("#upload-form button[type=submit]")
    # the second import job ran (a selector, not an evaluated string: the portal's CSP forbids eval)
    page.wait_for_selector("#uploads tr[data-status=ready] >> nth=1", timeout=60_000)
    page.click("button:has-text('Fit profile v1')")
    page.wait_for_selector("#fitted-collectives", timeout=60_000)  # the fit job ended; the page reloaded
    wait_js(page, "window.fpCharts && window.fpCharts['chart-nccl-0'] && window.fpCharts['chart-steps']")
    text = page.inner_text("#profile")
    assert "Profile v1" in text and "all_reduce" in text and "bf16" in text
    assert page.js_errors == [], page.js_errors
    page.reload()  # the flash message is consumed (base.html's <ul role="status"> is the portal's; reported)
    wait_js(page, "window.fpCharts && window.fpCharts['chart-steps']")
    assert_no_axe_violations(page)
    shot(page, "60-fleet-calibration")
