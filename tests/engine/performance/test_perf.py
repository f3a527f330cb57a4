from __future__ import annotations

import math

import pytest

from engine.catalog import default_catalog
from engine.document.parse import parse_scenario
from engine.performance.api import predict
from engine.performance.context import make_context
from engine.performance.hardware import gpu_spec
from engine.performance.result import Result
from engine.performance.terms.flops import flops_per_token
from tests.engine._scenarios import GPT_22B, scenario

OUTPUT_FIELDS = (
    "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
    "mfu", "hfu", "memory_gb_per_gpu", "fits", "time_to_train_days", "gpu_hours", "network_wait_fraction",
    "breakdown_s", "parallelism",
)
BREAKDOWN = {"compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "pp_bubble", "dp_comm_exposed", "optimizer",
             "stragglers"}


def test_result_contract_and_identities() -> None:
    doc = scenario()
    r = predict(doc)
    assert isinstance(r, Result)
    d = r.to_dict()
    for f in OUTPUT_FIELDS:
        assert f in d
    assert set(d["breakdown_s"]) == BREAKDOWN
    assert set(d["parallelism"]) >= {"tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "recompute", "zero"}
    assert r.parallelism["dp"] == 4
    tokens_step = 64 * 2048
    assert r.tokens_per_s * r.step_time_s == pytest.approx(tokens_step)
    assert r.tokens_per_s_per_gpu * 64 == pytest.approx(r.tokens_per_s)
    assert r.mfu == pytest.approx(r.model_tflops_per_gpu * 1e12 / 989e12)
    # selective recomputes no GEMM: with flash attention (H100 default) no extra FLOPs; with unfused
    # attention it recomputes the attention core (Korthikanti 2022), counted in hardware FLOPs
    assert r.hfu == pytest.approx(r.mfu)
    unfused = predict(scenario(training={"attention": "unfused"}))
    assert unfused.hfu > unfused.mfu
    assert r.time_to_train_days == pytest.approx(1e11 / r.tokens_per_s / 86400)
    assert r.gpu_hours == pytest.approx(r.time_to_train_days * 24 * 64)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert 0.0 <= r.network_wait_fraction < 1.0
    assert 0.2 < r.mfu < 0.8


def test_model_flops_match_megatron_formula() -> None:
    # Narayanan et al. 2021: F = 24 B s l h^2 (1 + s/(6h) + V/(16 l h)) per forward+backward x 3/... check
    s = parse_scenario(scenario())
    ctx = make_context(s, gpu_spec("H100-SXM"))
    f = flops_per_token(ctx)
    h, layers, seq, vocab = 6144, 48, 2048, 51200
    megatron_train = 72 * layers * h * h * (1 + seq / (6 * h) + vocab / (12 * layers * h))  # per token, 3x fwd
    assert 3 * f.forward_flops == pytest.approx(megatron_train, rel=1e-9)


def test_full_recompute_hardware_flops_four_thirds() -> None:
    r = predict(scenario(training={"recompute": "full"}))
    f_ratio = r.hardware_tflops_per_gpu / r.model_tflops_per_gpu
    # 4/3 on the transformer layers, 1 on the logits
    assert 1.25 < f_ratio < 4 / 3
    none = predict(scenario(training={"recompute": "none"}))
    assert none.hfu == pytest.approx(none.mfu)
    assert none.step_time_s < r.step_time_s
    assert none.memory_gb_per_gpu > r.memory_gb_per_gpu


def test_memory_shrinks_with_zero_stage_and_sequence_parallel() -> None:
    mems = [predict(scenario(training={"zero": z})).memory_gb_per_gpu for z in (0, 1, 2, 3)]
    assert mems[0] > mems[1] > mems[2] > mems[3] - 1.0  # zero-3 adds gather buffers but shards weights
    no_sp = scenario(parallelism={"tp": 8, "pp": 2, "cp": 1, "sequence_parallel": False})
    assert predict(no_sp).memory_gb_per_gpu > predict(scenario()).memory_gb_per_gpu


def test_does_not_fit_flag() -> None:
    huge = {**GPT_22B, "layers": 400, "hidden": 16384, "heads": 128, "kv_heads": 128, "ffn_hidden": 65536}
    r = predict(scenario(model=huge, cluster={"gpus": 16}, training={"global_batch": 16},
                         parallelism={"tp": 8, "pp": 2, "cp": 1}))
    assert not r.fits
    assert r.memory_gb_per_gpu > 80
    assert predict(scenario()).fits


def test_pipeline_bubble_follows_schedule() -> None:
    def run(vpp: int, gb: int) -> Result:
        return predict(scenario(training={"global_batch": gb},
                                parallelism={"tp": 8, "pp": 4, "cp": 1, "vpp": vpp, "sequence_parallel": True},
                                cluster={"gpus": 64}))

    a, b = run(1, 64), run(2, 64)
    m = 64 // 2  # dp = 2, micro_batch 1
    t_mb_a = (a.step_time_s - a.breakdown_s["pp_bubble"] - a.breakdown_s["dp_comm_exposed"]
              - a.breakdown_s["optimizer"] - a.breakdown_s["stragglers"]) / m
    assert a.breakdown_s["pp_bubble"] == pytest.approx(3 * t_mb_a, rel=1e-6)  # (pp-1) micro-batch slots
    assert b.breakdown_s["pp_bubble"] < 0.6 * a.breakdown_s["pp_bubble"]  # /vpp (plus extra p2p)
    big = run(1, 256)
    assert big.breakdown_s["pp_bubble"] / big.step_time_s < a.breakdown_s["pp_bubble"] / a.step_time_s


def test_tensor_parallel_across_nodes_is_slow() -> None:
    inside = predict(scenario(parallelism={"tp": 8, "pp": 1, "cp": 1}, training={"global_batch": 64}))
    across = predict(scenario(parallelism={"tp": 16, "pp": 1, "cp": 1}, training={"global_batch": 64}))
    # hierarchical ring: NVLink inside, the node's 8 NICs between the two nodes, plus network hop latency
    assert across.breakdown_s["tp_comm"] > 2.5 * inside.breakdown_s["tp_comm"]


def test_fp8_faster_but_lower_fraction_of_its_peak() -> None:
    bf16 = predict(scenario(training={"precision": "bf16"}))
    fp8 = predict(scenario(training={"precision": "fp8"}))
    assert fp8.step_time_s < bf16.step_time_s
    assert bf16.step_time_s / fp8.step_time_s < 2.0  # non-GEMM work does not speed up
    assert fp8.mfu < bf16.mfu  # against its own (2x) peak


def test_bigger_gpu_is_faster() -> None:
    times = {g: predict(scenario(cluster={"gpu": g})).step_time_s for g in ("A100-80GB", "H100-SXM", "B200")}
    assert times["A100-80GB"] > times["H100-SXM"] > times["B200"]
    h800 = predict(scenario(cluster={"gpu": "H800"}))
    assert h800.breakdown_s["tp_comm"] > predict(scenario()).breakdown_s["tp_comm"] * 1.8  # 400 vs 900 GB/s NVLink


def test_context_and_expert_parallel_terms() -> None:
    long = {**GPT_22B, "seq_len": 32768}
    r = predict(scenario(model=long, training={"global_batch": 8}, parallelism={"tp": 8, "pp": 1, "cp": 4}))
    assert r.breakdown_s["cp_comm"] > 0
    moe_model = {**GPT_22B, "moe": {"experts": 16, "top_k": 2, "expert_ffn_hidden": 8192}}
    moe = predict(scenario(model=moe_model, parallelism={"tp": 2, "pp": 1, "cp": 1, "ep": 8}))
    assert moe.breakdown_s["ep_comm"] > 0
    dense = predict(scenario(parallelism={"tp": 2, "pp": 1, "cp": 1}))
    assert dense.breakdown_s["ep_comm"] == 0


def test_catalog_override_changes_prediction() -> None:
    cat = default_catalog()
    cat["H100-SXM"]["specs"]["bf16_dense_tflops"] = 2 * 989.0
    fast = predict(scenario(), catalog=cat)
    base = predict(scenario())
    assert fast.step_time_s < base.step_time_s
    assert math.isclose(fast.mfu * 2, fast.model_tflops_per_gpu * 1e12 / 989e12, rel_tol=1e-9)
