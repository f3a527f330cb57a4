"""``cluster.gpus_per_rack`` through the API: the field is saved and read back as written, the preview sees its
64-GPU NVLink domain, and a bad value is a 400 naming the field (the engine's own check at save time)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.performance.test_rack_scale import gb300_dense
from tests.simulations.api._flows import save_workload

pytestmark = pytest.mark.django_db


def test_gpus_per_rack_round_trips_and_is_checked(world: dict[str, Any], api_client_for: Any) -> None:
    doc = gb300_dense()  # 1,152 GPUs: 16 packed racks of 72, or 18 racks of 64
    client = api_client_for(world["users"]["planner"])
    workload = save_workload(client, doc, "GB300 workload")
    cluster = {**doc["cluster"], "gpus_per_rack": 64}
    r = client.post("/api/v1/scenarios/", {"name": "64 of 72", "workload": workload, "cluster": cluster},
                    format="json")
    assert r.status_code == 201, r.content
    scenario_id = r.json()["id"]
    r = client.get(f"/api/v1/scenarios/{scenario_id}/")
    assert r.status_code == 200 and r.json()["cluster"]["gpus_per_rack"] == 64, r.content
    r = client.post("/api/v1/preview/", {"scenario": scenario_id}, format="json")
    assert r.status_code == 200, r.content
    spared = r.json()
    r = client.post("/api/v1/scenarios/", {"name": "packed", "workload": workload, "cluster": doc["cluster"]},
                    format="json")
    assert r.status_code == 201 and "gpus_per_rack" not in r.json()["cluster"], r.content
    packed = client.post("/api/v1/preview/", {"scenario": r.json()["id"]}, format="json").json()
    # 18 racks bought for the same 1,152 GPUs instead of 16: each used GPU-hour costs more
    assert spared["usd_per_gpu_hour"] > packed["usd_per_gpu_hour"], (spared, packed)

    for bad, words in ((73, "exceeds cluster.gpus_per_node=72"), (0, "between 1 and 576")):
        r = client.post("/api/v1/scenarios/", {"name": "bad", "workload": workload,
                                               "cluster": {**doc["cluster"], "gpus_per_rack": bad}}, format="json")
        assert r.status_code == 400, r.content
        errors = r.json()["errors"]
        assert "cluster.gpus_per_rack" in errors and words in str(errors["cluster.gpus_per_rack"]), errors
    hgx = {**doc["cluster"], "gpu": "B300", "gpus_per_node": 8, "gpus_per_rack": 8}
    r = client.post("/api/v1/scenarios/", {"name": "hgx", "workload": workload, "cluster": hgx}, format="json")
    assert r.status_code == 400 and "cluster.gpus_per_rack" in r.json()["errors"], r.content
