"""A scenario whose fixed settings the layout search would refuse is refused when it is saved (a 400 naming the
field), not accepted and failed when it runs: DeepSpeed's pipeline engine has no interleaved schedule,
Megatron-LM's needs micro-batches per step divisible by pp, and Megatron-LM before 2024-11 has no ZeRO-3
(engine/performance/frameworks.py). The same scenario with a setting the
framework runs saves."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine._scenarios import scenario

pytestmark = pytest.mark.django_db


def _save(client: Any, training: dict[str, Any], vpp: int) -> Any:
    doc = scenario(training=training, parallelism={"tp": 8, "pp": 4, "cp": 1, "ep": 1, "vpp": vpp,
                                                    "sequence_parallel": True})
    r = client.post("/api/v1/workloads/", {"name": "w", "model": doc["model"], "training": doc["training"],
                                           "parallelism": doc["parallelism"]}, format="json")
    if r.status_code != 201:
        return r
    return client.post("/api/v1/scenarios/", {"name": "s", "workload": r.json()["id"], "cluster": doc["cluster"]},
                       format="json")


@pytest.mark.parametrize(("training", "vpp", "field", "words"), [
    ({"framework": "deepspeed"}, 2, "parallelism.vpp", "no interleaved pipeline"),
    ({"framework": "megatron-core", "framework_release": "2023-06", "zero": 3}, 1, "training.zero", "ZeRO"),
    # dp 2, micro-batch 1: 18 micro-batches per step on 4 stages, which Megatron's interleaved schedule refuses
    ({"framework": "megatron-core", "global_batch": 36}, 2, "parallelism.vpp", "divisible by pp"),
])
def test_a_layout_the_framework_cannot_run_is_refused_at_save(world: dict[str, Any], api_client_for: Any,
                                                              training: dict[str, Any], vpp: int, field: str,
                                                              words: str) -> None:
    from planning.models import Scenario

    client = api_client_for(world["users"]["planner"])
    before = Scenario.objects.count()
    r = _save(client, training, vpp)
    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    assert field in errors and words in errors[field][0], errors
    assert Scenario.objects.count() == before


@pytest.mark.parametrize(("training", "vpp"), [({"framework": "deepspeed"}, 1), ({"framework": "megatron-core"}, 2)])
def test_the_same_scenario_with_a_runnable_layout_saves(world: dict[str, Any], api_client_for: Any,
                                                        training: dict[str, Any], vpp: int) -> None:
    r = _save(api_client_for(world["users"]["planner"]), training, vpp)
    assert r.status_code == 201, r.content



def test_a_search_too_large_to_enumerate_is_refused_at_save(world: dict[str, Any], api_client_for: Any) -> None:
    """DeepSeek-V3 (MoE + MLA) on 2,048 GPUs with every degree and the ZeRO stage "auto" would enumerate more candidate layouts than
    the search allows, so no run of it could start: the save refuses it naming parallelism and saying what to fix;
    with DeepSeek's own degrees (pipeline 16, expert parallel 64) it saves."""
    from planning.models import Scenario
    from planning.presets import PRESETS

    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/workloads/", {"name": "v3", "model": PRESETS["deepseek-v3"]["model"],
                                           "training": {"global_batch": 15360, "tokens": 14.8e12,
                                                        "precision": "fp8"},
                                           "parallelism": {"tp": 1, "pp": 16, "cp": 1, "ep": 64}}, format="json")
    assert r.status_code == 201, r.content
    fixed = r.json()["id"]
    r = client.post("/api/v1/workloads/", {"name": "v3 auto", "model": PRESETS["deepseek-v3"]["model"],
                                           "training": {"global_batch": 15360, "tokens": 14.8e12,
                                                        "precision": "fp8", "zero": "auto"},
                                           "parallelism": "auto"}, format="json")
    assert r.status_code == 201, r.content  # a workload alone has no cluster to size the search
    before = Scenario.objects.count()
    r = client.post("/api/v1/scenarios/", {"name": "v3 auto", "workload": r.json()["id"],
                                           "cluster": {"gpu": "H800", "gpus": 2048}}, format="json")
    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    assert "would enumerate" in errors["parallelism"][0] and "fix some parallelism degrees" in errors["parallelism"][0]
    assert Scenario.objects.count() == before
    r = client.post("/api/v1/scenarios/", {"name": "v3", "workload": fixed,
                                           "cluster": {"gpu": "H800", "gpus": 2048}}, format="json")
    assert r.status_code == 201, r.content
