"""Simulation jobs on real infrastructure: PostgreSQL, Redis and ``celery worker`` subprocesses.

* one run end to end through the API (POST → 202 → worker → stored result);
* a 12-run sweep whose worker is SIGKILLed mid-sweep: a second worker (and the reaper) finish it, and
  every child ends succeeded with exactly one stored result, claimed-and-finished by exactly one execution.

``FP_TASK_TEST_DELAY_S`` (worker env only) makes each child take ~1 s so the kill lands mid-sweep.
"""

from __future__ import annotations

import copy
import re
import signal
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration._waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

MODEL = {"name": "GPT-1.7B", "layers": 24, "hidden": 2304, "heads": 24, "kv_heads": 24, "ffn_hidden": 9216,
         "gated_ffn": False, "vocab": 51200, "seq_len": 2048}
TRAINING = {"global_batch": 512, "micro_batch": 1, "precision": "bf16", "recompute": "full", "tokens": 3.0e11,
            "zero": 0}
PARALLELISM = {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": False}
CLUSTER = {"gpu": "A100-80GB", "gpus": 32, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 200,
           "fabric": "infiniband", "topology": "fat-tree", "oversubscription": 1.0}
FINISHED = re.compile(r"simulations\.execute_run\[[^\]]+\] succeeded in [^:]+: \{'run': (\d+), 'claimed': True")




@pytest.fixture
def setup(make_user: Callable[..., Any]) -> dict[str, Any]:
    from planning import services as planning

    planning.catalog_load_default()
    user = make_user("planner")
    team = user.test_team
    workload = planning.workload_create(team=team, user=user, name="GPT-1.7B", model=copy.deepcopy(MODEL),
                                        training=copy.deepcopy(TRAINING), parallelism=copy.deepcopy(PARALLELISM))
    scenario = planning.scenario_create(team=team, user=user, name="A100 pod", workload=workload,
                                        cluster=copy.deepcopy(CLUSTER))
    return {"user": user, "team": team, "scenario": scenario}


def test_single_run_end_to_end_via_api(setup, celery_worker_factory, api_client_for, purge_broker) -> None:
    from simulations.models import SimulationRun

    worker = celery_worker_factory(queues="default,simulations")
    client = api_client_for(setup["user"])
    r = client.post(f"/api/v1/scenarios/{setup['scenario'].pk}/run/", {"kind": "tco"}, format="json")
    assert r.status_code == 202, r.content
    run_id = r.json()["id"]
    assert r["Location"].endswith(f"/api/v1/runs/{run_id}/")
    wait_for(lambda: client.get(f"/api/v1/runs/{run_id}/").json()["status"] in ("succeeded", "failed"), 60,
          "the run to finish")
    run = SimulationRun.objects.get(pk=run_id)
    assert run.status == "succeeded", (run.error, worker.output()[-3000:])
    assert run.progress == 100 and run.attempts == 1 and run.result["tco"]["capex_usd"] > 0
    result = client.get(f"/api/v1/runs/{run_id}/result/").json()
    assert result["result"]["tco"]["line_items"]


def test_sweep_survives_worker_sigkill_each_child_once(setup, celery_worker_factory, api_client_for,
                                                       purge_broker) -> None:
    from simulations import services
    from simulations.models import SimulationRun, Sweep

    # A short lease (heartbeat every 2 s) so the test is quick; the reaper below uses the same lease.
    lease = {"FP_RUN_LEASE_S": "6", "FP_RUN_HEARTBEAT_S": "2"}
    first = celery_worker_factory(queues="default,simulations", extra_env={**lease, "FP_TASK_TEST_DELAY_S": "1"})
    client = api_client_for(setup["user"])
    axes = {"cluster.gpus": [32, 64, 128, 256], "cluster.nic_gbps": [200, 400, 800]}
    r = client.post(f"/api/v1/scenarios/{setup['scenario'].pk}/sweep/", {"axes": axes, "kind": "predict"},
                    format="json")
    assert r.status_code == 202, r.content
    sweep_id = r.json()["id"]
    ids = list(SimulationRun.objects.filter(sweep_id=sweep_id).order_by("pk").values_list("pk", flat=True))
    assert len(ids) == 12

    # Kill the worker (whole process group, no warning) while a child is running and others are queued.
    wait_for(lambda: SimulationRun.objects.filter(pk__in=ids, status="succeeded").count() >= 2
          and SimulationRun.objects.filter(pk__in=ids, status="running").exists(), 60, "the sweep to be mid-way")
    first.kill(signal.SIGKILL)
    interrupted = list(SimulationRun.objects.filter(pk__in=ids, status="running").values_list("pk", flat=True))
    done_before = SimulationRun.objects.filter(pk__in=ids, status="succeeded").count()
    assert interrupted and done_before < 12

    # A new worker; the redelivered messages (short visibility timeout) and the reaper (as beat would call
    # it) both try to bring the interrupted child back: the claim lets exactly one execution finish it.
    second = celery_worker_factory(queues="default,simulations",
                                   extra_env={**lease, "FP_TASK_TEST_DELAY_S": "0.2", "CELERY_VISIBILITY_TIMEOUT": "5"})
    wait_for(lambda: SimulationRun.objects.filter(pk__in=ids, status="succeeded").count() == 12, 120,
          "every child to succeed", on_tick=lambda: services.run_reap(lease_s=6, redispatch_after_s=3))

    runs = list(SimulationRun.objects.filter(sweep_id=sweep_id))
    assert len(runs) == 12  # no duplicated rows
    assert all(r.status == "succeeded" and r.result and r.result["step_time_s"] > 0 for r in runs)
    assert all(r.error == "" for r in runs)
    for pk in interrupted:
        assert SimulationRun.objects.get(pk=pk).attempts >= 2
    # Exactly one execution claimed-and-finished each child (from both workers' logs). Celery logs a task's
    # "succeeded" line after the task has written its result, so the database can show every child done before the
    # last line reaches the worker's output: read the logs once every child has its line, then count.
    def finished_counts() -> Counter[int]:
        return Counter(int(m) for w in (first, second) for m in FINISHED.findall(w.output()))

    wait_for(lambda: all(finished_counts()[pk] for pk in ids), 30, "every child's 'succeeded' log line")
    finished = finished_counts()
    assert {pk: finished[pk] for pk in ids} == dict.fromkeys(ids, 1), (finished, second.output()[-3000:])
    wait_for(lambda: Sweep.objects.get(pk=sweep_id).status == "succeeded", 30, "the sweep summary")
    sweep = Sweep.objects.get(pk=sweep_id)
    assert sweep.summary["counts"] == {"succeeded": 12} and len(sweep.summary["runs"]) == 12
    assert sweep.summary["best"]["step_time_s"]["overrides"]["cluster.gpus"] == 256
