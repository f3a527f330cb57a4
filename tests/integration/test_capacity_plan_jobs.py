"""Capacity plans on real infrastructure (issue #14): PostgreSQL, Redis and a ``celery worker`` subprocess.

* a plan run end to end through the API (POST → 202 → worker → stored result, progress 100, quarters CSV);
* replications fanned out as one chord (a sweep of fleet runs) and merged into one P10/P50/P90 summary;
* a watched plan linked to a fleet: the fleet changes, the beat task (sent to the worker like celery beat does)
  re-runs the plan on the worker, and the re-evaluation records the diff in planner terms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration._waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

# 4 x 8 A100 (the fleet below: 32 GPUs) against ~56 GPUs of steady work: a shortfall from the first days;
# on 16 servers (128 GPUs) none.
PLAN: dict[str, Any] = {
    "horizon_days": 60, "failures": False, "replications": 2, "policy": "fifo",
    "clusters": [{"name": "main", "gpu": "H100-SXM", "gpus": 8}],
    "jobs": [{"name": "big", "gpus": 32, "duration_days": 20, "submit_day": 30, "deadline_day": 52}],
    "arrivals": [{"name": "research", "rate_per_day": 3.5, "gpus": 8, "duration_days": 2.0}],
}




@pytest.fixture
def setup(make_user: Callable[..., Any]) -> dict[str, Any]:
    from planning import services as planning
    from planning.services.capacity_plans import capacity_plan_create

    planning.catalog_load_default()
    user = make_user("planner")
    team = user.test_team
    fleet = planning.fleet_create(team=team, user=user, name="a100 pod", server_model="HGX-A100-80GB",
                                  server_count=4, nic_gbps=200, fabric="infiniband", topology="fat-tree")
    plan = capacity_plan_create(team=team, user=user, name="Next quarter", document=PLAN,
                                cluster_fleets={"main": fleet.pk}, watched=True)
    return {"user": user, "fleet": fleet, "plan": plan}


def test_plan_run_and_replications_on_a_worker(setup, celery_worker_factory, api_client_for, purge_broker) -> None:
    from simulations.models import SimulationRun

    worker = celery_worker_factory(queues="default,simulations")
    client = api_client_for(setup["user"])
    pk = setup["plan"].pk
    r = client.post(f"/api/v1/capacity-plans/{pk}/run/", {"params": {"replications": 3}}, format="json")
    assert r.status_code == 202, r.content
    run_id = r.json()["id"]
    wait_for(lambda: client.get(f"/api/v1/runs/{run_id}/").json()["status"] in ("succeeded", "failed"), 120,
          "the plan run to finish")
    run = SimulationRun.objects.get(pk=run_id)
    assert run.status == "succeeded", (run.error, worker.output()[-3000:])
    assert run.progress == 100 and run.attempts == 1 and run.kind == "fleet"
    summary = run.result["summary"]
    assert summary["replications"] == 3 and summary["first_shortfall_day"]["p50"] is not None
    assert run.input_snapshot["document"]["clusters"][0]["gpus"] == 32  # the fleet's shape, not the document's 8
    csv = client.get(f"/api/v1/capacity-plans/{pk}/quarters/?fmt=csv")
    assert csv.status_code == 200 and csv.content.decode().splitlines()[0].startswith("quarter,")
    # the same plan again: the stored result is reused (idempotency), no second job
    again = client.post(f"/api/v1/capacity-plans/{pk}/run/", {"params": {"replications": 3}}, format="json")
    assert again.status_code == 200 and again.json()["reused"] and again.json()["id"] == run_id
    # 4 replications as a chord of 2 runs of 2 seeds, merged
    r = client.post(f"/api/v1/capacity-plans/{pk}/replicate/", {"replications": 4, "chunk": 2}, format="json")
    assert r.status_code == 202, r.content
    sweep = r.json()["sweep"]
    body = wait_for(lambda: (lambda b: b if b["summary"] else None)(
        client.get(f"/api/v1/capacity-plans/{pk}/replications/?sweep={sweep}").json()), 120, "the chord")
    assert body["runs"] == 2 and body["replications_done"] == 4 and body["summary"]["replications"] == 4


def test_watched_plan_reevaluates_on_the_worker_when_its_fleet_changes(setup, celery_worker_factory,
                                                                       api_client_for, purge_broker) -> None:
    from planning import services as planning
    from simulations.models import ReEvaluation, SimulationRun
    from simulations.tasks import reevaluate_watched

    worker = celery_worker_factory(queues="default,simulations")
    client = api_client_for(setup["user"])
    pk = setup["plan"].pk
    r = client.post(f"/api/v1/capacity-plans/{pk}/run/", {"params": {"replications": 2}}, format="json")
    first = r.json()["id"]
    wait_for(lambda: SimulationRun.objects.get(pk=first).status == "succeeded", 120, "the first run")
    planning.fleet_update(fleet=setup["fleet"], user=setup["user"], server_count=16)
    reevaluate_watched.apply_async()  # what celery beat sends on its schedule
    reeval = wait_for(lambda: ReEvaluation.objects.filter(capacity_plan_id=pk, completed_at__isnull=False).first(),
                   150, "the re-evaluation to complete")
    assert reeval.previous_run_id == first and reeval.reasons == ["fleet a100 pod changed"], worker.output()[-2000:]
    new = SimulationRun.objects.get(pk=reeval.new_run_id)
    assert new.status == "succeeded" and new.trigger == "reevaluation"
    assert new.input_snapshot["document"]["clusters"][0]["gpus"] == 128
    assert "cluster main gpus 32 → 128" in reeval.summary
    assert "shortfall" in reeval.summary and "deadlines missed" in reeval.summary, reeval.summary
    listed = client.get("/api/v1/reevaluations/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert any(row["capacity_plan"] == pk and row["scenario"] is None for row in rows)
    # nothing changed since: the next beat queues nothing
    before = ReEvaluation.objects.count()
    reevaluate_watched.apply_async()
    time.sleep(3)
    assert ReEvaluation.objects.count() == before
