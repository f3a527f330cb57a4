"""training.attention's kernel classes: what "auto" resolves to from the stack at its release
(frameworks.default_attention) and the rate each class runs at in the step (terms/attention.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.performance.api import predict
from engine.performance.hardware import gpu_spec
from engine.performance.terms.attention import attention_core
from tests.engine.performance._build import build, dense_doc

ATTENTION_ROWS = Path(__file__).resolve().parents[3] / "engine/performance/data/components/attention.json"


def _eff(doc: dict[str, Any]) -> float:
    ctx, _, _ = build(doc)
    return ctx.fused_attn_eff


def _on(gpu: str, doc: dict[str, Any]) -> dict[str, Any]:
    doc["cluster"]["gpu"] = gpu
    return doc


@pytest.mark.parametrize(("framework", "release", "kernel"), [
    # Transformer Engine prefers cuDNN on sm90 from 32db39288 (2023-12-07); NeMo runs TE at every date
    ("nemo", "2023-11", "flash"), ("nemo", "2023-12", "native"), ("nemo", None, "native"),
    # Megatron-LM's default transformer_impl is TE from e7b74a4b7e (2024-04-02); before, FlashAttention-2
    ("megatron-core", "2023-12", "flash"), ("megatron-core", "2024-03", "flash"), ("megatron-core", "2024-04", "native"),
    ("megatron-core", None, "native"),
    # stacks whose attention is not TE's take the family's default: FlashAttention-2 on Hopper
    ("fsdp", None, "flash"), ("fsdp2", None, "flash"), ("deepspeed", None, "flash"), ("auto", None, "flash"),
])
def test_auto_is_the_kernel_class_the_stack_ran_on_hopper(framework: str, release: str | None, kernel: str) -> None:
    training = {"framework": framework} | ({"framework_release": release} if release else {})
    assert _eff(dense_doc(**training)) == gpu_spec("H100-SXM").fused_attn_eff(kernel)


def test_a_stated_kernel_class_wins_over_the_stacks() -> None:
    h100 = gpu_spec("H100-SXM")
    assert _eff(dense_doc(framework="nemo", attention="flash")) == h100.fused_attn_eff("flash")
    assert _eff(dense_doc(framework="fsdp", attention="native")) == h100.fused_attn_eff("native")


def test_blackwell_runs_the_native_class_unless_told_flash() -> None:
    """FlashAttention-2 has no Blackwell kernels: every stack's default there is cuDNN (TE >= sm90 from 544dd14b4,
    2025-02; PyTorch SDPA on sm100 with cuDNN > 9.15); a scenario that says flash gets FlashAttention-2's B200 rate."""
    b200 = gpu_spec("B200")
    for framework in ("auto", "fsdp", "nemo"):
        assert _eff(_on("B200", dense_doc(framework=framework))) == b200.fused_attn_eff("native")
    assert _eff(_on("B200", dense_doc(framework="fsdp", attention="flash"))) == b200.fused_attn_eff("flash")


def _measured_step_rate(gpu: str, implementation: str, tokens: int) -> float:
    """3.5 / (1/fwd + 2.5/bwd) [TFLOP/s] of causal head-dim-128 bf16 rows: forward plus the 2.5x backward at one
    rate, as the model runs them."""
    rows = json.loads(ATTENTION_ROWS.read_text())["rows"]
    rate = {r["pass"]: r["tflops"] for r in rows if r["gpu"] == gpu and r["implementation"] == implementation
            and r["causal"] is True and r["precision"] == "bf16" and r["head_dim_qk"] == 128 and r["seqlen_q"] == tokens}
    return 3.5 / (1.0 / rate["fwd"] + 2.5 / rate["bwd"])


def test_the_native_forward_is_the_causal_half_at_cudnns_measured_rate() -> None:
    """Llama-2-7B, TP 8, s 4096, b 1 on NeMo (H100): 4 M s a d / t FLOPs counted, the causal half done at cuDNN's
    measured rate on H200 (same tensor peak, 989 TFLOP/s) at 4K tokens, 3.5 / (1/591 + 2.5/474) = 502 TFLOP/s (the
    engine: 0.57 of peak at 8K on the curve L / (L + 1,250), 498), plus one kernel pair; backward 2.5 x the
    forward."""
    ctx, lay, shape = build(dense_doc(tp=8, framework="nemo"))
    measured = _measured_step_rate("H200", "cudnn (cudnn-frontend SDPA)", 4096) * 1e12
    flops = 4.0 * 4096 * 4096 * 4096 / 8
    fwd = 0.5 * flops / measured + 2 * 3e-6
    attn = attention_core(ctx, lay, shape)
    assert attn.forward_s[0] == pytest.approx(fwd, rel=0.02)
    assert attn.backward_s[0] == pytest.approx(2.5 * attn.forward_s[0], rel=1e-9)


def test_the_same_run_is_faster_on_the_native_class_by_at_most_its_attention_time() -> None:
    """One layout, two classes: the native run is the faster one (on H100 at 4K tokens, 0.50 of peak against
    FlashAttention-2's 0.35), by the attention core's forward and backward over every layer and micro-batch, less what the shorter
    compute no longer hides of the step's communication (TP and DP collectives overlap it)."""
    flash = predict(dense_doc(tp=8, framework="nemo", attention="flash"))
    native = predict(dense_doc(tp=8, framework="nemo", attention="native"))
    assert native.step_time_s is not None and flash.step_time_s is not None
    assert native.step_time_s < flash.step_time_s
    gained = flash.step_time_s - native.step_time_s
    ctx_f, lay, shape = build(dense_doc(tp=8, framework="nemo", attention="flash"))
    ctx_n, _, _ = build(dense_doc(tp=8, framework="nemo", attention="native"))
    per_mb = ((attention_core(ctx_f, lay, shape).forward_s[0] + attention_core(ctx_f, lay, shape).backward_s[0])
              - (attention_core(ctx_n, lay, shape).forward_s[0] + attention_core(ctx_n, lay, shape).backward_s[0]))
    layers, microbatches = 32, 64 / 8  # global batch 64 over dp 8, one sequence per micro-batch
    assert 0.8 * per_mb * layers * microbatches <= gained <= per_mb * layers * microbatches * (1 + 1e-9)
