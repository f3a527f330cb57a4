"""Accessibility basics on the pages planners use: axe-core (WCAG 2.1 A/AA), a label on every input,
keyboard navigation through the scenario builder, readable delta colours, the sign-in hint, no 404s."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations, contrast_ratio, effective_colors, parse_rgb
from tests.browser.conftest import needs_chromium, new_page, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

LLAMA_8B = {"name": "Llama-3-8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
            "gated_ffn": True, "vocab": 128256, "seq_len": 8192}


def _finished_runs(team: Any, user: Any) -> tuple[Any, list[Any]]:
    """A scenario and three succeeded TCO runs at 200/400/800G with real engine results (no worker needed)."""
    from engine.cost.tco import tco
    from planning import services as planning
    from simulations import services as sim
    from simulations.models import RunKind, RunStatus, SimulationRun

    planning.catalog_load_default()
    workload = planning.workload_create(team=team, user=user, name="8B", model=dict(LLAMA_8B),
                                        training={"global_batch": 256, "tokens": 1e12, "precision": "bf16"},
                                        parallelism="auto")
    scenario = planning.scenario_create(team=team, user=user, name="8B a11y", workload=workload,
                                        cluster={"gpu": "H100-SXM", "gpus": 64, "gpus_per_node": 8, "nic_gbps": 400,
                                                 "fabric": "infiniband", "topology": "rail-optimized"})
    runs = []
    for speed in (200, 400, 800):
        doc, version, values = planning.scenario_resolve(scenario=scenario)
        doc["cluster"]["nic_gbps"] = speed
        run = sim.run_create(team=team, user=user, kind=RunKind.TCO, document=doc, version=version, values=values,
                             scenario=scenario, overrides={"cluster.nic_gbps": speed}, label=f"nic_gbps={speed}")
        result = sim.jsonable(tco(doc, catalog=values))
        SimulationRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, result=result, progress=100)
        runs.append(run)
    return scenario, runs


def test_sign_in_page_hints_at_the_demo_login_and_has_no_404s(live_server: Any, browser: Any) -> None:
    page = new_page(browser)
    page.goto(f"{live_server.url}/accounts/login/")
    hint = page.locator("#login-hint").inner_text()
    assert "demo" in hint and "make run" in hint
    assert_no_axe_violations(page)
    assert page.missing == [], page.missing
    shot(page, "40-sign-in")


def test_builder_labels_axe_and_keyboard(live_server: Any, browser: Any, make_user: Any, team: Any) -> None:
    planner = make_user("planner", team=team, username="kim-keys")
    from planning import services

    services.catalog_load_default()
    page = sign_in(browser, live_server.url, planner.username)
    page.goto(f"{live_server.url}/scenarios/new/")
    page.wait_for_selector("#est-step-time")

    unlabeled = page.evaluate("""() => Array.from(document.querySelectorAll(
            '#builder-form input:not([type=hidden]), #builder-form select, #builder-form textarea'))
        .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                      && !el.getAttribute('aria-labelledby'))
        .map(el => el.name || el.id)""")
    assert unlabeled == [], unlabeled
    assert_no_axe_violations(page)

    # Tab from the top of the form reaches every enabled control in document order, with a focus ring; a
    # closed disclosure (<details>: model dimensions, uncertainty ranges) opens with Enter on its summary.
    page.focus("#builder-form [name=name]")
    expected = page.evaluate("""() => { const closed = Array.from(document.querySelectorAll('#builder-form details:not([open])'));
      closed.forEach(d => d.open = true);
      const keys = Array.from(document.querySelectorAll(
            '#builder-form input:not([type=hidden]), #builder-form select, #builder-form textarea, #builder-form button'))
        .filter(el => !el.disabled && el.offsetParent !== null && el.tabIndex >= 0)
        .map(el => el.type === 'radio' ? 'radio:' + el.name : (el.name || el.id || el.textContent.trim()))
        .filter((v, i, a) => a.indexOf(v) === i);
      closed.forEach(d => d.open = false);
      return keys; }""")
    reached: list[str] = []
    outlines: list[str] = []
    for _ in range(len(expected) + 5):
        if page.evaluate("() => document.activeElement.tagName === 'SUMMARY' && !document.activeElement.parentElement.open"):
            page.keyboard.press("Enter")
        info = page.evaluate("""() => { const el = document.activeElement;
            const cs = getComputedStyle(el);
            return {key: el.type === 'radio' ? 'radio:' + el.name : (el.name || el.id || el.textContent.trim()),
                    inForm: !!el.closest('#builder-form'),
                    ring: cs.outlineStyle !== 'none' && cs.outlineWidth !== '0px' || cs.boxShadow !== 'none'}; }""")
        if not info["inForm"]:
            break
        if info["key"] not in reached:
            reached.append(info["key"])
            if not info["ring"]:
                outlines.append(info["key"])
        page.keyboard.press("Tab")
    missing = [k for k in expected if k not in reached]
    assert missing == [], f"not reachable with Tab: {missing}"
    assert outlines == [], f"no visible focus indicator: {outlines}"
    # the keyboard alone changes a radio group (arrow keys) and the live estimate follows
    page.focus("#builder-form input[name=nic_gbps]:checked")
    page.keyboard.press("ArrowRight")
    assert page.locator("#builder-form input[name=nic_gbps]:checked").get_attribute("value") != "400"
    # a rack-scale GPU brings its own server size (72 per NVL72 rack); back to an HGX GPU, 8 again
    page.select_option("#builder-form select[name=gpu]", "GB300")
    assert page.input_value("#builder-form [name=gpus_per_node]") == "72"
    page.select_option("#builder-form select[name=gpu]", "H100-SXM")
    assert page.input_value("#builder-form [name=gpus_per_node]") == "8"
    shot(page, "41-builder-keyboard")


def test_comparison_delta_colours_are_readable(live_server: Any, browser: Any, make_user: Any, team: Any) -> None:
    planner = make_user("planner", team=team, username="dee-deltas")
    _scenario, runs = _finished_runs(team, planner)
    page = sign_in(browser, live_server.url, planner.username)
    page.goto(f"{live_server.url}/compare/?runs={','.join(str(r.pk) for r in runs)}")
    page.wait_for_selector("#compare-table")
    cells = effective_colors(page, "#compare-table .delta-good, #compare-table .delta-bad")
    assert cells, "expected coloured deltas"
    for c in cells:
        ratio = contrast_ratio(parse_rgb(c["color"]), parse_rgb(c["background"]))
        assert ratio >= 4.5, (c, ratio)
    # percentage metrics move in points, not relative percent
    mfu_row = page.locator("#compare-table tbody tr", has_text="MFU").first.inner_text()
    assert " pt" in mfu_row, mfu_row
    assert_no_axe_violations(page)
    shot(page, "42-comparison-deltas")
