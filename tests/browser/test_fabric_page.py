"""The fabric study page as a planner uses it (issue #13): open it from the navigation, pick a scenario and
options, run the study on a real worker, and read the sentence, the efficiency table, the per-tier bars and
the per-flow histogram when it finishes (the page refreshes itself while the study runs)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

MODEL = {"name": "Llama-2-7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
         "vocab": 32000, "seq_len": 4096}
CLUSTER = {"gpu": "H100-SXM", "gpus": 2048, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400,
           "fabric": "roce", "topology": "fat-tree", "oversubscription": 1.0}


def test_fabric_study_page(live_server: Any, browser: Any, make_user: Any, team: Any, celery_worker_factory: Any,
                           purge_broker: Any) -> None:
    from planning import services as planning

    planning.catalog_load_default()
    user = make_user("planner", team=team, username="fabric-planner")
    workload = planning.workload_create(team=team, user=user, name="Llama-2-7B", model=copy.deepcopy(MODEL),
                                        training={"global_batch": 2048, "micro_batch": 1, "tokens": 1e12},
                                        parallelism={"tp": 8, "pp": 1})
    scenario = planning.scenario_create(team=team, user=user, name="2K H100 RoCE", workload=workload,
                                        cluster=copy.deepcopy(CLUSTER))
    celery_worker_factory(concurrency=1)
    base = live_server.url
    page = sign_in(browser, base, user.username)
    page.click("nav a:has-text('Fabric studies')")
    page.wait_for_url(f"{base}/fabric/")
    assert_no_axe_violations(page)
    page.select_option("#id_scenario", str(scenario.pk))
    page.select_option("#id_traffic", "ring-allreduce")
    page.select_option("#id_routing", "compare")
    page.fill("#id_ranks", "1024")
    page.fill("#id_seeds", "5")
    shot(page, "40-fabric-form")
    page.click("#fabric-form button[type=submit]")
    page.wait_for_url(re.compile(rf"{re.escape(base)}/fabric/runs/\d+/"))
    page.wait_for_selector("#fabric-quote", timeout=90_000)  # the page refreshes itself until the study ends
    quote = page.locator("#fabric-quote").inner_text()
    assert re.search(r"single-QP ECMP delivers \d+% of line rate to this 1,024-GPU ring all-reduce; "
                     r"8 QPs: \d+%; adaptive: \d+%", quote), quote
    rows = page.locator("#efficiency-table tbody tr")
    assert rows.count() == 3
    assert page.locator(".tier-bars").count() == 3 and page.locator(".flow-hist").count() == 3
    assert_no_axe_violations(page)
    shot(page, "41-fabric-results")
    # "a team may run its own study and pin a scenario to it": use it for the scenario, see it named there
    page.select_option("#pin-scenario", str(scenario.pk))
    page.click("#pin-study")
    page.wait_for_url(f"{base}/scenarios/{scenario.pk}/")
    pin = page.locator("#fabric-study-pin").inner_text()
    assert re.search(r"Pinned to fabric study #\d+", pin) and "single-QP ECMP" in pin, pin
    assert_no_axe_violations(page)
    shot(page, "42-scenario-pinned-study")
    scenario.refresh_from_db()
    assert scenario.fabric_study["shares"][0]["routing"] == "ecmp"
    assert page.js_errors == [], page.js_errors
