"""Property tests over every layout of several models: better hardware is never slower (issue #10)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.performance.api import _attention_layouts, candidate_layouts, predict
from engine.performance.collectives.placement import NET_BASE_S, SWITCH_HOP_S
from engine.performance.context import make_context
from engine.performance.hardware import gpu_spec
from engine.performance.model import evaluate
from tests.engine._scenarios import LLAMA_7B, scenario

MOE = {"name": "moe", "layers": 16, "hidden": 2048, "heads": 16, "kv_heads": 16, "ffn_hidden": 8192,
       "gated_ffn": True, "vocab": 32000, "seq_len": 4096,
       "moe": {"experts": 64, "top_k": 6, "expert_ffn_hidden": 1408, "shared_experts": 2, "dense_layers": 1,
               "dense_ffn_hidden": 8192}}
# with two multi-token-prediction modules on the last pipeline rank (terms/mtp.py): the tail beside the output layer
MODELS = {"gpt-22b": None, "llama-7b": LLAMA_7B, "moe-16b": MOE, "moe-16b-allgather": MOE,
          "moe-16b-mtp": {**MOE, "mtp_layers": 2}}
# per-model training settings: the all-gather token dispatcher (gathers over TP x EP, crosses the NICs)
TRAINING = {"moe-16b-allgather": {"moe_dispatcher": "allgather"}}
PARAMS = list(MODELS)
AUTO = {"tp": "auto", "pp": "auto", "cp": "auto", "ep": "auto", "vpp": "auto", "sequence_parallel": "auto"}


def _steps(model: dict | None, gpu: str = "H100-SXM", training: dict | None = None, **cluster: object) -> np.ndarray:
    doc = scenario(parallelism=dict(AUTO), training={"micro_batch": "auto", "recompute": "auto", "zero": "auto",
                                                    "global_batch": 256, **(training or {})},
                   cluster={"gpus": 256, "gpu": gpu, "tiers": 2, **cluster})
    if model is not None:
        doc["model"] = dict(model)
    s = parse_scenario(doc)
    lay = candidate_layouts(s)
    return evaluate(make_context(s, gpu_spec(gpu)), lay).step_time_s


@pytest.mark.parametrize("name", PARAMS)
def test_more_bandwidth_more_nics_less_oversubscription_adaptive_never_slower(name: str) -> None:
    m, t = MODELS[name], TRAINING.get(name)
    base = _steps(m, training=t, nic_gbps=200, oversubscription=2.0, routing="ecmp", fabric="roce")
    tol = 1e-9

    def steps(**cluster: object) -> np.ndarray:
        return _steps(m, training=t, **cluster)

    assert np.all(steps(nic_gbps=400, oversubscription=2.0, routing="ecmp", fabric="roce") <= base * (1 + tol))
    assert np.all(steps(nic_gbps=200, oversubscription=1.0, routing="ecmp", fabric="roce") <= base * (1 + tol))
    assert np.all(steps(nic_gbps=200, oversubscription=2.0, routing="ecmp-qp", fabric="roce") <= base * (1 + tol))
    assert np.all(steps(nic_gbps=200, oversubscription=2.0, routing="adaptive", fabric="roce", switch="SN5600")
                  <= base * (1 + tol))
    fewer_nics = steps(nic_gbps=400, nics_per_node=4)
    assert np.all(steps(nic_gbps=400, nics_per_node=8) <= fewer_nics * (1 + tol))
    # ranks in switch order (cluster.rank_assignment): rings cross the oversubscribed tier less, nothing crosses more
    aligned = steps(nic_gbps=200, oversubscription=2.0, routing="ecmp", fabric="roce", rank_assignment="topology-aware")
    assert np.all(aligned <= base * (1 + tol))
    assert np.all(steps(nic_gbps=200, oversubscription=1.0, routing="ecmp", fabric="roce",
                        rank_assignment="topology-aware") <= aligned * (1 + tol))


@pytest.mark.parametrize("slow_gpu,fast_gpu", [("A100-80GB", "H100-SXM"), ("H100-SXM", "B200")])
@pytest.mark.parametrize("name", PARAMS)
def test_faster_gpu_never_slower(name: str, slow_gpu: str, fast_gpu: str) -> None:
    m = MODELS[name]
    a100 = parse_scenario(scenario(parallelism=dict(AUTO), training={"micro_batch": "auto", "recompute": "auto",
                                                                      "zero": "auto", "global_batch": 256,
                                                                      **TRAINING.get(name, {})},
                                   cluster={"gpus": 256, "gpu": "H100-SXM", "nic_gbps": 400}))
    if m is not None:
        a100 = dataclasses.replace(a100, model=parse_scenario(scenario(cluster={"gpus": 256}) | {"model": m}).model)
    slow_ctx = make_context(a100, gpu_spec(slow_gpu))
    lay = _attention_layouts(slow_ctx, candidate_layouts(a100))  # an unfused (A100) stack has no CP (issue #22)
    slow = evaluate(slow_ctx, lay).step_time_s
    fast = evaluate(make_context(a100, gpu_spec(fast_gpu)), lay).step_time_s
    assert np.all(fast <= slow * (1 + 1e-9))


# ------------------------------------------------------------------ issue #22: with the fabric re-sized

RESIZE_MODELS = {"llama-8b": {"name": "llama-8b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                              "ffn_hidden": 14336, "gated_ffn": True, "vocab": 128256, "seq_len": 4096},
                 "llama-70b": {"name": "llama-70b", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                               "ffn_hidden": 28672, "gated_ffn": True, "vocab": 128256, "seq_len": 4096},
                 "moe-16b": MOE}
SLACK = 0.005  # 0 violations above 0.5% of a step


def _resized(model: dict, gpus: int, **cluster: object) -> np.ndarray:
    """Every layout's step time with the fabric sized for this cluster (no tiers pinned: leaves and tiers move)."""
    doc = scenario(parallelism=dict(AUTO), training={"micro_batch": "auto", "recompute": "auto", "zero": "auto",
                                                    "global_batch": 2 * gpus},
                   cluster={"gpus": gpus, "gpu": "H100-SXM", **cluster})
    doc["model"] = dict(model)
    s = parse_scenario(doc)
    return evaluate(make_context(s, gpu_spec(str(cluster.get("gpu", "H100-SXM")))), candidate_layouts(s)).step_time_s


PAIRS = {  # (smaller fabric, bigger fabric)
    "more bandwidth": ({"nic_gbps": 200}, {"nic_gbps": 400}),
    "more NICs": ({"nics_per_node": 4}, {"nics_per_node": 8}),
    "less oversubscription": ({"oversubscription": 2.0}, {"oversubscription": 1.0}),
    "less oversubscription, roce": ({"oversubscription": 4.0, "fabric": "roce"}, {"oversubscription": 2.0, "fabric": "roce"}),
    "adaptive routing": ({"fabric": "roce", "routing": "ecmp"}, {"fabric": "roce", "routing": "adaptive", "switch": "SN5600"}),
}


@pytest.mark.parametrize("gpus", [64, 512, 4096])
@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("name", sorted(RESIZE_MODELS))
def test_bigger_fabric_never_slower_when_resized(name: str, pair: str, gpus: int) -> None:
    small, big = PAIRS[pair]
    slow = _resized(RESIZE_MODELS[name], gpus, **small)
    fast = _resized(RESIZE_MODELS[name], gpus, **big)
    if pair == "more NICs" and gpus == 4096:
        # 8 NICs x 512 nodes = 4,096 endpoints need a 3rd tier (64-port switches hold 64^2/2 = 2,048 in two): a
        # path through the core crosses 5 switches instead of 3, so a layout whose step is network latency (ZeRO-3
        # over thousands of ranks, tens of seconds of per-step latency against one second of compute) can be slower
        # with more NICs, by at most the ratio of the per-step latencies (independent closed form from the
        # measured per-hop figures: (base + 5 hops) / (base + 3 hops), InfiniBand); the planner's layout (the
        # fastest) is never slower (test_more_nics_best_layout_never_slower_when_resized).
        bound = (NET_BASE_S["infiniband"] + 5 * SWITCH_HOP_S["infiniband"]) / (
            NET_BASE_S["infiniband"] + 3 * SWITCH_HOP_S["infiniband"])
        assert float((fast / slow).max()) <= bound * (1 + SLACK)
        return
    worse = fast > slow * (1 + SLACK)
    assert not worse.any(), f"{int(worse.sum())} layouts slower, worst {float((fast / slow).max()) - 1:+.1%}"


@pytest.mark.parametrize("name", sorted(RESIZE_MODELS))
def test_more_nics_best_layout_never_slower_when_resized(name: str) -> None:
    """The layout the search picks (the fastest that fits) is faster with 8 NICs than with 4, 3rd tier and all."""
    steps = []
    for nics in (4, 8):
        doc = scenario(parallelism=dict(AUTO), training={"micro_batch": "auto", "recompute": "auto", "zero": "auto",
                                                        "global_batch": 2 * 4096},
                       cluster={"gpus": 4096, "gpu": "H100-SXM", "nics_per_node": nics})
        doc["model"] = dict(RESIZE_MODELS[name])
        steps.append(predict(doc).step_time_s)
    assert steps[1] <= steps[0] * (1 + SLACK)
