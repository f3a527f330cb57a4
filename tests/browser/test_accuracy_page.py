"""The Accuracy page in a browser: reached from the main navigation, both charts drawn with the shipped summary's
data (error per set; measured against predicted per-GPU throughput change per scaling step), the run table opens,
axe-core (WCAG 2.1 A/AA) finds nothing, no JS error and no missing file."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.validation.summary import SUMMARY_PATH
from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in, wait_js

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

READ = """() => Object.fromEntries(['chart-set-errors', 'chart-scaling'].map(id => [id,
    window.fpCharts[id].data.datasets.map(d => d.data)]))"""


def test_accuracy_page_from_the_navigation(live_server: Any, browser: Any, make_user: Any, team: Any) -> None:
    shipped = json.loads(SUMMARY_PATH.read_text(encoding="utf-8"))
    viewer = make_user("viewer", team=team, username="acc-viewer")
    page = sign_in(browser, live_server.url, viewer.username)
    page.click("nav.mainnav a:has-text('Accuracy')")
    page.wait_for_url(f"{live_server.url}/accuracy/")
    wait_js(page, "window.fpCharts && window.fpCharts['chart-set-errors'] && window.fpCharts['chart-scaling']")
    drawn = page.evaluate(READ)
    assert drawn["chart-scaling"] == [[s["measured_change"] for s in shipped["scaling_steps"]],
                                      [s["predicted_change"] for s in shipped["scaling_steps"]]]
    assert drawn["chart-set-errors"][1] == [s["loso_mape"] for s in shipped["sets"]]
    page.click("#rows-h")  # the <details> of every run opens
    assert page.locator("#rows-table tbody tr").count() == len(shipped["rows"])
    assert page.js_errors == [] and page.missing == [], (page.js_errors, page.missing)
    assert_no_axe_violations(page)
    shot(page, "70-accuracy")
