"""The list pages in a browser: every list page passes axe-core (WCAG 2.1 A/AA) with rows, a sorted column and a
pager on it; clicking a header sorts (and says so with aria-sort), clicking again reverses, "Next" shows the
rest, and a run that does not fit in GPU memory is the red badge in the cost column."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

LLAMA_8B = {"name": "Llama-3-8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
            "gated_ffn": True, "vocab": 128256, "seq_len": 8192}


def _world(team: Any, user: Any) -> list[Any]:
    """A scenario, a fleet, a token and three finished runs (the newest does not fit in GPU memory)."""
    from accounts import services as accounts
    from planning import services as planning
    from simulations import services as sim
    from simulations.models import RunKind, SimulationRun

    planning.catalog_load_default()
    workload = planning.workload_create(team=team, user=user, name="8B", model=dict(LLAMA_8B),
                                        training={"global_batch": 256, "tokens": 1e12, "precision": "bf16"},
                                        parallelism="auto")
    scenario = planning.scenario_create(team=team, user=user, name="8B lists", workload=workload,
                                        cluster={"gpu": "H100-SXM", "gpus": 64, "gpus_per_node": 8, "nic_gbps": 400,
                                                 "fabric": "infiniband", "topology": "rail-optimized"})
    planning.fleet_create(team=team, user=user, name="Pod A", server_model="HGX-H100", server_count=4)
    planning.fleet_create(team=team, user=user, name="pod b", server_model="HGX-H100", server_count=2)
    accounts.token_issue(user=user, team=team, name="list token", expires_at=None)
    runs = []
    doc, version, values = planning.scenario_resolve(scenario=scenario)
    for i, label in enumerate(("beta", "alpha", "gamma")):
        run = sim.run_create(team=team, user=user, kind=RunKind.TCO, document=doc, version=version, values=values,
                             scenario=scenario, overrides={"cluster.gpus": 8 * (i + 1)}, label=label)
        result: dict[str, Any] = {"tco": {"run_cost_usd": 1000.0 * (i + 1)}}
        if label == "gamma":
            result["performance"] = {"fits": False, "memory_gb_per_gpu": 120.0, "memory_limit_gb": 75.0}
        SimulationRun.objects.filter(pk=run.pk).update(status="succeeded", result=result, progress=100)
        runs.append(run)
    return runs


def _labels(page: Any) -> list[str]:
    return [t.split(" sweep")[0].strip() for t in page.locator("#runs-table tbody tr td:nth-child(2)").all_inner_texts()]


def test_list_pages_sort_page_and_pass_axe(live_server: Any, browser: Any, make_user: Any, team: Any) -> None:
    planner = make_user("planner", team=team, username="lee-lists")
    runs = _world(team, planner)
    base = live_server.url
    page = sign_in(browser, base, planner.username)

    # runs: newest first; the does-not-fit run shows the red badge where its cost would be
    page.goto(f"{base}/runs/")
    assert _labels(page) == ["gamma", "alpha", "beta"]
    assert page.locator(f"#run-row-{runs[2].pk} .badge-nofit").count() == 1
    assert "$" not in page.locator(f"#run-row-{runs[2].pk} td").nth(6).inner_text()
    # click "Label": ascending, aria-sort says so; again: descending
    page.click("#runs-table thead th a:has-text('Label')")
    page.wait_for_url("**/runs/?sort=title")
    assert _labels(page) == ["alpha", "beta", "gamma"]
    assert page.locator("#runs-table thead th[aria-sort=ascending]").inner_text().strip().lower() == "label"
    page.click("#runs-table thead th a:has-text('Label')")
    page.wait_for_url("**/runs/?sort=-title")
    assert _labels(page) == ["gamma", "beta", "alpha"]
    # two per page: the pager names itself, "Next" shows the rest, in the same order
    page.goto(f"{base}/runs/?sort=title&per_page=2")
    assert _labels(page) == ["alpha", "beta"]
    assert_no_axe_violations(page)
    shot(page, "60-runs-sorted-paged")
    page.click("nav.pager a:has-text('Next')")
    page.wait_for_url("**page=2**")
    assert _labels(page) == ["gamma"]

    # every other list page with rows passes axe, with its table's headers scoped
    for path, table in (("/scenarios/", "#scenarios-table"), ("/fleets/?sort=-name", "#fleets-table"),
                        ("/catalog/?kind=gpu&sort=-unit_price_usd&per_page=5", "#catalog-table"),
                        ("/tokens/", "#token-table")):
        page.goto(f"{base}{path}")
        assert page.locator(f"{table} tbody tr").count() >= 1, path
        assert page.locator(f"{table} thead th:not([scope=col])").count() == 0, path
        assert_no_axe_violations(page)
    page.goto(f"{base}/fleets/?sort=name")
    assert page.locator("#fleets-table tbody tr td:first-child").all_inner_texts() == ["Pod A", "pod b"]
    shot(page, "61-fleets-sorted")
    assert page.js_errors == [], page.js_errors
