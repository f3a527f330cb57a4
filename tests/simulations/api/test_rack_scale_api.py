"""GB300 NVL72 at 800 Gb/s per GPU through the API: save, preview and a priced tco run (real engine, no stand-in)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.engine.performance.test_rack_scale import gb300_dense, gb300_moe

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("workload", [gb300_dense, gb300_moe], ids=["dense", "moe"])
def test_gb300_scenario_previews_and_prices(world: dict[str, Any], api_client_for: Any, workload: Any) -> None:
    from simulations import services

    doc = workload()
    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/workloads/", {"name": "GB300 workload", "model": doc["model"],
                                           "training": doc["training"], "parallelism": doc["parallelism"]},
                    format="json")
    assert r.status_code == 201, r.content
    r = client.post("/api/v1/scenarios/", {"name": "GB300 NVL72", "workload": r.json()["id"],
                                           "cluster": doc["cluster"]}, format="json")
    assert r.status_code == 201, r.content
    scenario_id = r.json()["id"]

    r = client.post("/api/v1/preview/", {"scenario": scenario_id}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["fits"] is True and r.json()["mfu"] > 0.1

    r = client.post(f"/api/v1/scenarios/{scenario_id}/run/", {"kind": "tco"}, format="json")
    assert r.status_code == 202, r.content
    run = services.run_execute(run_id=r.json()["id"])
    assert run is not None and run.status == "succeeded", getattr(run, "error", None)
    r = client.get(f"/api/v1/runs/{run.pk}/result/")
    assert r.status_code == 200, r.content
    result = r.json()
    body = result.get("result", result)
    assert body["tco"]["server_model"] == "GB300-NVL72"
    assert body["fabric"]["nvlink_domain_gpus"] == 72 and body["fabric"]["link_gbps"] == 800.0
    assert body["performance"]["fits"] is True


def test_unbuildable_gb300_fabric_is_refused_at_save_time(world: dict[str, Any], api_client_for: Any) -> None:
    """The same check predict and tco apply: 1,152 GPUs cannot hang off one switch tier."""
    doc = gb300_dense()
    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/workloads/", {"name": "w", "model": doc["model"], "training": doc["training"],
                                           "parallelism": doc["parallelism"]}, format="json")
    cluster = copy.deepcopy(doc["cluster"])
    cluster["tiers"] = 1
    r = client.post("/api/v1/scenarios/", {"name": "s", "workload": r.json()["id"], "cluster": cluster},
                    format="json")
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert list(errors) == ["cluster.gpus"] and "cluster.tiers=1" in errors["cluster.gpus"][0], errors
