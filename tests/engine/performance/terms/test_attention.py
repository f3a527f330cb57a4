"""The attention core (terms/attention.py): fused kernels at FlashAttention-2's measured rate, short blocks with
context parallelism, and unfused score GEMMs + HBM passes."""

from __future__ import annotations

import pytest

from engine.errors import ScenarioError
from engine.performance.api import predict, search
from engine.performance.terms.attention import (
    attention_core,
    native_block_rate,
    short_block_rate,
    unfused_attention,
)
from tests.engine.performance._build import build, dense_doc, gemm_by_hand, hbm_by_hand


def test_fused_forward_is_half_the_counted_flops_at_attn_eff() -> None:
    """Llama-2-7B, TP 8, s 4096, b 1: 4 M s ad / t FLOPs counted, causal half done at 989 TFLOP/s x 0.35, plus one
    kernel pair; backward 2.5 x the forward."""
    ctx, lay, shape = build(dense_doc(tp=8))
    flops = 4.0 * 4096 * 4096 * 4096 / 8
    fwd = 0.5 * flops / (989e12 * 0.35) + 2 * 3e-6
    attn = attention_core(ctx, lay, shape)
    assert attn.forward_s[0] == pytest.approx(fwd, rel=1e-9)
    assert attn.backward_s[0] == pytest.approx(2.5 * fwd, rel=1e-9)


def test_short_blocks_lose_rate_like_flashattention_figures() -> None:
    """Rate ~ L/(L + 440) relative to L = 2048, floored at 0.5: 1K tokens 0.85, 512 tokens 0.66."""
    assert short_block_rate(4096.0) == 1.0
    assert short_block_rate(1024.0) == pytest.approx((1024 / 1464) / (2048 / 2488), rel=1e-12)
    assert short_block_rate(1024.0) == pytest.approx(0.85, abs=0.01)
    assert short_block_rate(512.0) == pytest.approx(0.66, abs=0.01)
    assert short_block_rate(16.0) == 0.5


def test_native_kernels_keep_gaining_past_2k_tokens_relative_to_8k() -> None:
    """The native class's curve (L / (L + L_h)) / (8192 / (8192 + L_h)), no ceiling: cuDNN on H200 measures 0.40,
    0.51, 0.57, 0.61 of peak at 2K, 4K, 8K, 16K (forward plus 2.5x backward), i.e. 0.70, 0.89, 1, 1.06 of its 8K
    rate; with L_h = 1,250 the curve gives 0.72, 0.88, 1, 1.07."""
    for tokens, measured in ((2048.0, 0.70), (4096.0, 0.89), (8192.0, 1.0), (16384.0, 1.06)):
        assert native_block_rate(tokens, 1250.0) == pytest.approx(measured, abs=0.03)
    assert native_block_rate(2048.0, 1250.0) == pytest.approx((2048 / 3298) / (8192 / 9442), rel=1e-12)


def test_native_context_parallel_blocks_run_on_the_native_curve() -> None:
    """NeMo on H100, s 4096, CP 4: 1,024-token key blocks at 0.57 x native_block_rate(1024) of 989 TFLOP/s."""
    ctx, lay, shape = build(dense_doc(tp=8, cp=4, gb=16, framework="nemo"))
    flops = 4.0 * 1024 * 4096 * 4096 / 8
    rate = 989e12 * 0.57 * (1024 / 2274) / (8192 / 9442)
    assert attention_core(ctx, lay, shape).forward_s[0] == pytest.approx(0.5 * flops / rate + 2 * 4 * 3e-6, rel=1e-9)


def test_context_parallel_ring_runs_fused_short_blocks_with_a_kernel_pair_per_step() -> None:
    ctx, lay, shape = build(dense_doc(tp=8, cp=4, gb=16))
    flops = 4.0 * 1024 * 4096 * 4096 / 8  # M = s/c tokens against the whole sequence
    rate = 989e12 * 0.35 * (1024 / 1464) / (2048 / 2488)
    assert attention_core(ctx, lay, shape).forward_s[0] == pytest.approx(0.5 * flops / rate + 2 * 4 * 3e-6, rel=1e-9)


def test_unfused_attention_is_score_gemms_plus_score_traffic() -> None:
    """Scores in HBM: per head QK^T (s x d x s) and AV (s x s x d) bf16 GEMMs, 9 B (fwd) and 11 B (bwd) per score
    at HBM speed, 2 kernels each way; backward runs the score GEMMs twice (dgrad + wgrad)."""
    ctx, lay, shape = build(dense_doc(tp=8, attention="unfused"))
    heads = 32 / 8
    s, d = 4096.0, 128.0
    t_sc = 2 * gemm_by_hand(ctx, s, d, s, count=heads, bf16=True)  # QK^T and AV have the same shape product
    scores = heads * s * s
    attn = attention_core(ctx, lay, shape)
    assert bool(attn.unfused[0])
    assert attn.forward_s[0] == pytest.approx(t_sc + hbm_by_hand(ctx, 9 * scores) + 6e-6, rel=1e-9)
    assert attn.backward_s[0] == pytest.approx(2 * t_sc + hbm_by_hand(ctx, 11 * scores) + 6e-6, rel=1e-9)


def test_context_parallelism_does_not_switch_an_unfused_stack_to_fused_attention() -> None:
    """CP keeps the stack's kernel; an unfused stack gets no CP: refused when fixed, excluded when searched."""
    ctx, lay, _ = build(dense_doc(tp=8, cp=1, gb=16, attention="unfused"))
    assert bool(unfused_attention(ctx, lay.cp * 4.0)[0])
    with pytest.raises(ScenarioError) as err:
        predict(dense_doc(tp=8, cp=4, gb=16, attention="unfused"))
    assert err.value.field == "parallelism.cp"
    doc = dense_doc(tp=8, cp=4, gb=16, attention="unfused")
    doc["parallelism"]["cp"] = "auto"
    assert search(doc).parallelism["cp"] == 1
    assert search(doc).candidates_evaluated == 1  # only CP 1 is a candidate
    doc["training"]["attention"] = "flash"
    assert search(doc).candidates_evaluated > 1


def test_a_sliding_window_scales_the_fused_kernel_work_and_its_key_range() -> None:
    """Window w = 1,024 of s = 4,096: a causal kernel visits w (1 - w / 2s) = 896 keys per query (s/2 = 2,048 without
    a window), at the rate of 1K-token key ranges."""
    model = {"name": "swa", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
             "vocab": 32000, "seq_len": 4096, "attention_window": 1024}
    ctx, lay, shape = build(dense_doc(tp=8, model=model))
    flops = 4.0 * 4096 * 896.0 * 4096 / 8
    rate = 989e12 * 0.35 * (1024 / 1464) / (2048 / 2488)
    attn = attention_core(ctx, lay, shape)
    assert attn.forward_s[0] == pytest.approx(flops / rate + 2 * 3e-6, rel=1e-9)
    assert attn.backward_s[0] == pytest.approx(2.5 * attn.forward_s[0], rel=1e-12)
    # a window as long as the sequence is full attention (parsed away)
    full = build(dense_doc(tp=8, model=dict(model, attention_window=4096)))[0]
    assert full.attention_window == 0.0 and full.attn_causal_keys == 2048.0


SWA_MODEL = {"name": "swa", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
             "vocab": 32000, "seq_len": 4096, "attention_window": 1024}


@pytest.mark.parametrize(("every", "global_layers"), [(2, 16), (6, 5), (32, 1)])
def test_global_layers_mix_full_attention_with_the_window(every: int, global_layers: int) -> None:
    """model.global_attention_every k: floor(32 / k) layers attend to all 4,096 keys (2,048 per query causally, at the
    2K-range rate), the rest to the 1,024-token window (896 keys per query, at the 1K-range rate); the layer average
    of both kernel times."""
    ctx, lay, shape = build(dense_doc(tp=8, model=dict(SWA_MODEL, global_attention_every=every)))
    g = global_layers / 32
    local = 4.0 * 4096 * 896.0 * 4096 / 8 / (989e12 * 0.35 * (1024 / 1464) / (2048 / 2488))
    full = 4.0 * 4096 * 2048.0 * 4096 / 8 / (989e12 * 0.35)
    attn = attention_core(ctx, lay, shape)
    assert attn.forward_s[0] == pytest.approx((1 - g) * local + g * full + 2 * 3e-6, rel=1e-9)
    assert ctx.attn_keys == pytest.approx((1 - g) * 1024 + g * 4096, rel=1e-12)


def test_global_every_needs_a_window_and_one_is_full_attention() -> None:
    from engine.document.parse import parse_scenario
    from engine.errors import ScenarioError

    no_window = {k: v for k, v in SWA_MODEL.items() if k != "attention_window"}
    for model in (dict(no_window, global_attention_every=4), dict(SWA_MODEL, global_attention_every=33),
                  dict(SWA_MODEL, global_attention_every=0)):
        with pytest.raises(ScenarioError) as err:
            parse_scenario(dense_doc(model=model))
        assert err.value.field == "model.global_attention_every"
    from engine.schema.types import scenario_to_dict

    written = scenario_to_dict(parse_scenario(dense_doc(model=dict(SWA_MODEL, global_attention_every=6))))["model"]
    assert (written["attention_window"], written["global_attention_every"]) == (1024, 6)
    assert "global_attention_every" not in scenario_to_dict(parse_scenario(dense_doc(model=SWA_MODEL)))["model"]
    every_layer = build(dense_doc(tp=8, model=dict(SWA_MODEL, global_attention_every=1)))[0]
    assert every_layer.attention_window == 0.0 and every_layer.attn_causal_keys == 2048.0
