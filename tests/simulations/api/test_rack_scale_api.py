"""GB300 NVL72 at 800 Gb/s per GPU through the API: save, preview and a priced tco run (real engine, no stand-in)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.engine.performance.test_rack_scale import gb300_dense, gb300_moe
from tests.simulations.api._flows import run_result, save_scenario, save_workload

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("workload", [gb300_dense, gb300_moe], ids=["dense", "moe"])
def test_gb300_scenario_previews_and_prices(world: dict[str, Any], api_client_for: Any, workload: Any) -> None:
    doc = workload()
    client = api_client_for(world["users"]["planner"])
    scenario_id = save_scenario(client, doc, "GB300 NVL72")

    r = client.post("/api/v1/preview/", {"scenario": scenario_id}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["fits"] is True and r.json()["mfu"] > 0.1

    _, body = run_result(client, scenario_id, "tco")
    assert body["tco"]["server_model"] == "GB300-NVL72"
    assert body["fabric"]["nvlink_domain_gpus"] == 72 and body["fabric"]["link_gbps"] == 800.0
    assert body["performance"]["fits"] is True


def test_unbuildable_gb300_fabric_is_refused_at_save_time(world: dict[str, Any], api_client_for: Any) -> None:
    """The same check predict and tco apply: 1,152 GPUs cannot hang off one switch tier."""
    doc = gb300_dense()
    client = api_client_for(world["users"]["planner"])
    cluster = copy.deepcopy(doc["cluster"])
    cluster["tiers"] = 1
    r = client.post("/api/v1/scenarios/", {"name": "s", "workload": save_workload(client, doc), "cluster": cluster},
                    format="json")
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert list(errors) == ["cluster.gpus"] and "cluster.tiers=1" in errors["cluster.gpus"][0], errors
