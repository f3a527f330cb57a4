"""A run that cannot fit in GPU memory says so first, in red, wherever a planner sees it.

Llama-3-405B on 16 A100-40GB (the case from the issue): whichever way the engine answers — a result with
``fits: false`` (figures may be null) or a refusal — the run page and the scenario page open with the red
does-not-fit warning, before any figure.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations, contrast_ratio, effective_colors, parse_rgb
from tests.browser.conftest import needs_chromium, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

LLAMA_405B = {"name": "Llama-3-405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
              "ffn_hidden": 53248, "gated_ffn": True, "vocab": 128256, "seq_len": 8192}


def _is_red(css: str) -> bool:
    r, g, b = parse_rgb(css)
    return r > 120 and r > 2 * g and r > 2 * b


def test_does_not_fit_warning_comes_first_in_red(live_server: Any, browser: Any, make_user: Any, team: Any,
                                                  celery_worker_factory: Any, purge_broker: Any) -> None:
    from planning import services

    services.catalog_load_default()
    planner = make_user("planner", team=team, username="fay-fit")
    workload = services.workload_create(team=team, user=planner, name="405B", model=dict(LLAMA_405B),
                                        training={"global_batch": 2048, "tokens": 15e12, "precision": "bf16"},
                                        parallelism="auto")
    scenario = services.scenario_create(team=team, user=planner, name="405B on 16 A100-40GB", workload=workload,
                                        cluster={"gpu": "A100-40GB", "gpus": 16, "gpus_per_node": 8,
                                                 "nic_gbps": 200, "fabric": "infiniband", "topology": "fat-tree"})
    celery_worker_factory(concurrency=1)
    base = live_server.url
    page = sign_in(browser, base, planner.username)
    page.goto(f"{base}/scenarios/{scenario.pk}/")
    page.click("#run-tco")
    page.wait_for_url(f"{base}/runs/*/")
    page.wait_for_selector("#fit-warning", timeout=120_000)

    warning = page.locator("#fit-warning")
    assert "does not fit" in warning.inner_text().lower()
    assert warning.get_attribute("role") == "alert"
    # first: nothing with a figure comes before the warning
    order = page.evaluate("""() => {
        const w = document.querySelector('#fit-warning');
        const figs = Array.from(document.querySelectorAll('#run-results, #line-items, #layout-panel'));
        return figs.every(f => w.compareDocumentPosition(f) & Node.DOCUMENT_POSITION_FOLLOWING);
    }""")
    assert order, "the warning must come before the figures"
    colors = effective_colors(page, "#fit-warning strong")[0]
    assert _is_red(colors["color"]), colors
    assert contrast_ratio(parse_rgb(colors["color"]), parse_rgb(colors["background"])) >= 4.5
    shot(page, "20-run-does-not-fit")
    assert_no_axe_violations(page)

    page.goto(f"{base}/scenarios/{scenario.pk}/")
    latest = page.locator(".fit-warning")
    assert latest.count() >= 1 and "does not fit" in latest.first.inner_text().lower()
    assert "Not run yet" not in page.locator("main").inner_text()
    shot(page, "21-scenario-does-not-fit")
    assert page.js_errors == [], page.js_errors
