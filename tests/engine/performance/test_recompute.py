"""Selective recomputation = recompute everything except the GEMMs (docs/performance-model.md sections 2, 6).

With unfused attention that is Korthikanti et al. 2022's attention-core recompute; with a fused (flash)
kernel there are no stored scores, so selective recomputes the layernorm and activation-function outputs
(Megatron-Core ``--recompute-modules layernorm mlp moe_act``) from stored tensors: less memory than `none`,
only memory-bound elementwise time, far less than `full`.
"""

from __future__ import annotations

import copy

import pytest

from engine.document.parse import parse_scenario
from engine.performance.api import predict
from engine.performance.context import make_context
from engine.performance.hardware import gpu_spec
from engine.validation.runs import BLACKWELL_RUNS, load_runs
from tests.engine._scenarios import LLAMA_7B, scenario

GPT3_H100 = "nemo-25.02-h100-gpt3-175b-512"


def _three(doc: dict) -> dict:
    out = {}
    for rc in ("none", "selective", "full"):
        d = copy.deepcopy(doc)
        d["training"]["recompute"] = rc
        out[rc] = predict(d)
    return out


@pytest.mark.parametrize("model", [None, LLAMA_7B])  # GeLU GPT-22B and SwiGLU Llama
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_flash_selective_between_none_and_full(model, precision) -> None:
    doc = scenario(model=model, training={"precision": precision})
    sc = parse_scenario(doc)
    assert make_context(sc, gpu_spec(sc.cluster.gpu)).unfused_attn is False  # H100 default: flash
    r = _three(doc)
    assert r["full"].memory_gb_per_gpu < r["selective"].memory_gb_per_gpu < r["none"].memory_gb_per_gpu
    assert r["none"].step_time_s < r["selective"].step_time_s < r["full"].step_time_s
    # elementwise only: a few percent of `full`'s overhead at most
    extra_sel = r["selective"].step_time_s - r["none"].step_time_s
    extra_full = r["full"].step_time_s - r["none"].step_time_s
    assert extra_sel < 0.1 * extra_full
    assert r["selective"].hfu == pytest.approx(r["selective"].mfu)  # no GEMM recomputed


def test_flash_selective_saving_matches_tensor_accounting() -> None:
    """GPT-22B bf16, TP8 + SP, mb 1: saved bytes = layernorm outputs 4h/t + GeLU output 2f/t per token-layer."""
    doc = scenario(parallelism={"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True},
                   cluster={"gpus": 8}, training={"global_batch": 8})
    r = _three(doc)
    h, f, s, layers = 6144, 24576, 2048, 48
    saved = (4 * h / 8 + 2 * f / 8) * s * layers
    assert (r["none"].memory_gb_per_gpu - r["selective"].memory_gb_per_gpu) * 1e9 == pytest.approx(saved, rel=1e-9)


def test_unfused_selective_keeps_korthikanti_attention_core() -> None:
    """Unfused: selective additionally drops the 5as/t score bytes and recomputes the attention core."""
    unf = _three(scenario(training={"attention": "unfused"}))
    fla = _three(scenario(training={"attention": "flash"}))
    assert unf["selective"].memory_gb_per_gpu == pytest.approx(fla["selective"].memory_gb_per_gpu, rel=1e-9)
    assert unf["none"].memory_gb_per_gpu > fla["none"].memory_gb_per_gpu  # stored scores
    assert unf["selective"].hfu > unf["selective"].mfu  # attention-core FLOPs recomputed
    assert (unf["selective"].step_time_s - unf["none"].step_time_s
            > fla["selective"].step_time_s - fla["none"].step_time_s)


def test_auto_picks_selective_not_full_at_the_memory_cliff() -> None:
    """GPT-3 175B MBS 2 on 512 H100 (NeMo 25.02): `none` is just over the usable HBM, selective fits."""
    run = next(r for r in load_runs(BLACKWELL_RUNS) if r["id"] == GPT3_H100)
    auto = predict(run["scenario"])
    p = auto.parallelism
    fixed = copy.deepcopy(run["scenario"])
    for k in ("tp", "pp", "cp", "vpp"):
        fixed["parallelism"][k] = p[k]
    fixed["training"].update(micro_batch=p["micro_batch"], zero=p["zero"])
    r = _three(fixed)
    # usable HBM counts the binary bytes of an "80 GB" H100 (81,559 MiB), so `none` now fits too; auto
    # takes the fastest layout that fits and never falls to full recomputation
    assert r["selective"].fits
    best = min((x for x in r.values() if x.fits), key=lambda x: x.step_time_s)
    assert p["recompute"] == best.parallelism["recompute"]
    assert auto.step_time_s == pytest.approx(best.step_time_s, rel=1e-12)
    assert auto.step_time_s < 0.85 * r["full"].step_time_s
