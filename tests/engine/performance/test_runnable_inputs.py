"""check_runnable reads only api.RUNNABLE_INPUTS of a document (the contract planning.runnable_key relies on to check a
sweep once per layout space): its verdict on a scenario - runs, or the field it refuses - is the same whatever the
cluster's other fields are, and changes with the inputs it names."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import RUNNABLE_INPUTS, check_runnable
from tests.engine._scenarios import scenario

# one scenario per verdict: runs, and each of check_runnable's refusals
_CASES: dict[str, dict[str, Any]] = {
    "runs": scenario(),
    "no interleaving on DeepSpeed": scenario(training={"framework": "deepspeed"},
                                             parallelism={"tp": 8, "pp": 2, "cp": 1, "ep": 1, "vpp": 2}),
    "interleaving needs micro-batches a multiple of pp": scenario(
        training={"global_batch": 36, "framework": "megatron-core"},
        parallelism={"tp": 8, "pp": 4, "cp": 1, "ep": 1, "vpp": 2}),
    "no ZeRO-3 in Megatron-LM 2023": scenario(training={"framework": "megatron-core", "framework_release": "2023-06",
                                                        "zero": 3}),
    "ZeRO-2 beside DeepSpeed's pipeline": scenario(training={"framework": "deepspeed", "zero": 2}),
    "no NVFP4 on H100": scenario(training={"precision": "nvfp4"}),
}
# cluster fields outside RUNNABLE_INPUTS, each set to a value the parser accepts for every case
_OTHER_CLUSTER: list[dict[str, Any]] = [
    {"nic_gbps": 200}, {"nic_gbps": 800}, {"nics_per_node": 4}, {"fabric": "roce"}, {"fabric": "infiniband"},
    {"topology": "rail-optimized"}, {"oversubscription": 4.0}, {"tiers": 3}, {"routing": "adaptive"},
    {"gpus_per_node": 4},
]


def _verdict(doc: dict[str, Any]) -> str | None:
    spec = parse_scenario(doc)  # outside the try: a document the parser refuses fails the test, not a verdict
    try:
        check_runnable(spec)
    except ScenarioError as exc:
        return exc.field
    return None


def test_the_cluster_fields_it_does_not_name_never_change_the_verdict() -> None:
    assert all(p.split(".")[0] in ("model", "training", "parallelism", "cluster") for p in RUNNABLE_INPUTS)
    assert not {f"cluster.{k}" for change in _OTHER_CLUSTER for k in change} & set(RUNNABLE_INPUTS)
    verdicts = {name: _verdict(doc) for name, doc in _CASES.items()}
    assert verdicts["runs"] is None and all(v is not None for k, v in verdicts.items() if k != "runs"), verdicts
    for name, doc in _CASES.items():
        for change in _OTHER_CLUSTER:
            varied = copy.deepcopy(doc)
            varied["cluster"].update(change)
            assert _verdict(varied) == verdicts[name], (name, change)


_INTERLEAVED = {"tp": 8, "pp": 4, "cp": 1, "ep": 1, "vpp": 2}


@pytest.mark.parametrize(("training", "parallelism", "cluster", "key", "value"), [
    # NVFP4 tensor cores on Blackwell only
    ({"precision": "nvfp4"}, None, {"gpu": "B200"}, "gpu", "H100-SXM"),
    # 48 sequences on tp 8 x pp 4 with interleaving: 64 GPUs give dp 2 and 24 micro-batches per step (a multiple of
    # pp 4, runs), 256 give dp 8 and 6 micro-batches (refused; the parser accepts both: 48 divides by 2 and 8)
    ({"global_batch": 48, "framework": "megatron-core"}, _INTERLEAVED, {"gpus": 64}, "gpus", 256),
])
def test_the_cluster_fields_it_names_can_change_it(training: dict[str, Any], parallelism: dict[str, Any] | None,
                                                   cluster: dict[str, Any], key: str, value: Any) -> None:
    assert f"cluster.{key}" in RUNNABLE_INPUTS
    doc = scenario(training=training, parallelism=parallelism, cluster=cluster)
    assert _verdict(doc) is None
    doc["cluster"][key] = value
    assert _verdict(doc) is not None
