"""Capacity plans as a planner uses them (issue #14): open them from the main navigation, build a plan from the
team's fleet and workload in the builder, run it on a real worker, read the results page (headline with the
shortfall day, stacked utilization chart per cluster with its band, Gantt, purchase recommendation), then
compare it with a second plan side by side. Each page passes axe."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

MODEL = {"name": "GPT-1.7B", "layers": 24, "hidden": 2304, "heads": 24, "kv_heads": 24, "ffn_hidden": 9216,
         "gated_ffn": False, "vocab": 51200, "seq_len": 2048}
TRAINING = {"global_batch": 512, "micro_batch": 1, "precision": "bf16", "recompute": "full", "tokens": 3.0e10}
ARRIVALS = '[{"name": "research", "rate_per_day": 3.5, "gpus": 8, "duration_days": 2}]'
CANDIDATES = '[{"name": "H100 pod", "gpu": "H100-SXM", "nic_gbps": 400, "gpus": [32, 64], "in_service_day": 5}]'


def test_capacity_plan_builder_results_and_compare(live_server: Any, browser: Any, make_user: Any, team: Any,
                                                   celery_worker_factory: Any, purge_broker: Any) -> None:
    from planning import services as planning
    from planning.services.capacity_plans import capacity_plan_create
    from simulations import services
    from simulations.services.capacity_plans import capacity_plan_submit

    planning.catalog_load_default()
    user = make_user("planner", team=team, username="capacity-planner")
    fleet = planning.fleet_create(team=team, user=user, name="a100 pod", server_model="HGX-A100-80GB",
                                  server_count=4, nic_gbps=200, fabric="infiniband", topology="fat-tree")
    workload = planning.workload_create(team=team, user=user, name="GPT-1.7B", model=copy.deepcopy(MODEL),
                                        training=copy.deepcopy(TRAINING), parallelism="auto")
    celery_worker_factory(concurrency=1)
    base = live_server.url
    page = sign_in(browser, base, user.username)
    page.click("nav a:has-text('Capacity plans')")
    page.wait_for_url(f"{base}/capacity/")
    assert_no_axe_violations(page)
    page.click("a:has-text('New plan')")
    page.wait_for_url(f"{base}/capacity/new/")
    page.fill("#id_name", "Next quarter")
    page.fill("#id_horizon_days", "60")
    assert page.locator(f"input[name=fleets][value='{fleet.pk}']").is_checked()  # starts from the team's fleets
    page.fill("#id_arrivals", ARRIVALS)
    page.fill("#id_candidates", CANDIDATES)
    page.fill("#id_replications", "3")
    page.fill("#id_jobs-0-name", "pretrain")
    page.select_option("#id_jobs-0-workload", str(workload.pk))
    page.fill("#id_jobs-0-gpus", "16")
    page.fill("#id_jobs-0-submit_day", "10")
    page.fill("#id_jobs-0-deadline_day", "40")
    assert_no_axe_violations(page)
    shot(page, "50-capacity-builder")
    page.click("#plan-form button[type=submit]")
    page.wait_for_url(re.compile(rf"{re.escape(base)}/capacity/\d+/edit/"))
    assert page.locator("#id_jobs-0-workload").input_value() == str(workload.pk)  # the job round-trips
    page.reload()  # the flash message is gone; the page itself is checked
    assert_no_axe_violations(page)
    page.click("button:has-text('Run plan')")
    page.wait_for_url(re.compile(rf"{re.escape(base)}/capacity/runs/\d+/"))
    page.wait_for_selector("#capacity-headline", timeout=120_000)  # the page refreshes itself while simulating
    shortfall = page.locator("#shortfall").inner_text()
    assert re.search(r"\d+ / \d+ / \d+", shortfall) and "of 3 replications" in shortfall, shortfall
    assert page.locator("canvas, svg").count() >= 1 and page.locator(".gantt").count() == 1
    purchase = page.locator("#purchase").inner_text()
    assert "H100 pod" in purchase, purchase
    assert_no_axe_violations(page)
    shot(page, "51-capacity-results")
    # a second plan with twice the GPUs, run in this process; then both side by side
    from planning.models import CapacityPlan

    plan = CapacityPlan.objects.get(name="Next quarter")
    bigger = copy.deepcopy(plan.document)
    bigger["clusters"] = [{"name": "main", "gpu": "A100-80GB", "gpus": 128, "nic_gbps": 200}]
    other = capacity_plan_create(team=team, user=user, name="Bigger pod", document=bigger)
    run = capacity_plan_submit(plan=other, user=user, params={"replications": 3, "search": False})
    assert services.run_execute(run_id=run.pk).status == "succeeded"
    page.goto(f"{base}/capacity/")
    page.click("a:has-text('Compare plans')")
    page.check(f"#cmp-plan-{plan.pk}")
    page.check(f"#cmp-plan-{other.pk}")
    page.click("#compare-form button[type=submit]")
    page.wait_for_selector("#plan-compare")
    table = page.locator("#plan-compare").inner_text().lower()  # headers are upper-cased by CSS
    assert "next quarter" in table and "bigger pod" in table and "first shortfall day" in table
    assert "purchase recommendation" in table and "no purchase search" in table and "best" in table
    assert_no_axe_violations(page)
    shot(page, "52-capacity-compare")
    assert page.js_errors == [], page.js_errors
