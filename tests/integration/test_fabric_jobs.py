"""Fabric studies on real infrastructure (issue #13): PostgreSQL, Redis and a ``celery worker`` subprocess.

* a study end to end through the API (POST → 202 → worker → stored result, progress 100);
* a long study cancelled through the API while the worker simulates it: the worker stops at its next seed and
  stores nothing; the run ends cancelled with the seeds it had done in its progress message.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration._waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

MODEL = {"name": "Llama-2-7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
         "vocab": 32000, "seq_len": 4096}
TRAINING = {"global_batch": 4096, "micro_batch": 1, "precision": "bf16", "tokens": 1e12}
PARALLELISM = {"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True}
CLUSTER = {"gpu": "H100-SXM", "gpus": 4096, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400,
           "fabric": "roce", "topology": "fat-tree", "oversubscription": 1.0}




@pytest.fixture
def setup(make_user: Callable[..., Any]) -> dict[str, Any]:
    from planning import services as planning

    planning.catalog_load_default()
    user = make_user("planner")
    team = user.test_team
    workload = planning.workload_create(team=team, user=user, name="Llama-2-7B", model=copy.deepcopy(MODEL),
                                        training=copy.deepcopy(TRAINING), parallelism=copy.deepcopy(PARALLELISM))
    scenario = planning.scenario_create(team=team, user=user, name="4K H100 RoCE", workload=workload,
                                        cluster=copy.deepcopy(CLUSTER))
    return {"user": user, "scenario": scenario}


def test_fabric_study_end_to_end_on_a_worker(setup, celery_worker_factory, api_client_for, purge_broker) -> None:
    from simulations.models import SimulationRun

    worker = celery_worker_factory(queues="default,simulations")
    client = api_client_for(setup["user"])
    r = client.post(f"/api/v1/scenarios/{setup['scenario'].pk}/run/",
                    {"kind": "fabric", "params": {"seeds": 4, "ranks": 1024}}, format="json")
    assert r.status_code == 202, r.content
    run_id = r.json()["id"]
    wait_for(lambda: client.get(f"/api/v1/runs/{run_id}/").json()["status"] in ("succeeded", "failed"), 90,
          "the study to finish")
    run = SimulationRun.objects.get(pk=run_id)
    assert run.status == "succeeded", (run.error, worker.output()[-3000:])
    assert run.progress == 100 and run.attempts == 1
    result = client.get(f"/api/v1/runs/{run_id}/result/").json()["result"]
    assert [row["label"] for row in result["table"]] == ["single-QP ECMP", "8 QPs", "adaptive"]
    assert "1,024-GPU ring all-reduce" in result["quote"]
    p50 = {row["label"]: row["p50"] for row in result["table"]}
    assert p50["single-QP ECMP"] < p50["adaptive"]


def test_cancelling_a_running_study_stops_the_worker(setup, celery_worker_factory, api_client_for,
                                                     purge_broker, settings) -> None:
    from simulations.models import SimulationRun

    # a study long enough to cancel mid-run: 100 seeds of a 4K-GPU permutation, more than the default run budget's
    # admission estimate allows (issue #23 refuses it at submit); this web process admits it under a longer budget
    settings.FP_RUN_BUDGET_S = 3600.0

    worker = celery_worker_factory(queues="default,simulations")
    client = api_client_for(setup["user"])
    r = client.post(f"/api/v1/scenarios/{setup['scenario'].pk}/run/",
                    {"kind": "fabric", "params": {"seeds": 100, "traffic": "permutation", "routing": "ecmp",
                                                  "qps": 8}}, format="json")
    assert r.status_code == 202, r.content
    run_id = r.json()["id"]
    wait_for(lambda: "seeds" in client.get(f"/api/v1/runs/{run_id}/").json()["progress_message"], 90,
          "the worker to report seeds")
    assert client.post(f"/api/v1/runs/{run_id}/cancel/").status_code == 200
    wait_for(lambda: "was cancelled or taken over" in worker.output(), 60, "the worker to notice the cancel")
    run = SimulationRun.objects.get(pk=run_id)
    assert run.status == "cancelled" and run.result is None
    assert run.attempts == 1
