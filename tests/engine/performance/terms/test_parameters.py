"""Parameter counts (terms/parameters.py)."""

from __future__ import annotations

import pytest

from engine.performance.terms.parameters import gpu_params, params_per_layer
from tests.engine.performance._build import build, dense_doc, moe_doc


def test_llama_7b_layer_and_gpu_counts() -> None:
    """Q, K, V, output 4h^2 (32 KV heads = MHA) and SwiGLU 3 h f per layer; TP 8 splits them, the one stage also
    holds the embedding and the untied output layer (2 V h / t)."""
    ctx, lay, shape = build(dense_doc(tp=8))
    h, f, v = 4096.0, 11008.0, 32000.0
    p = params_per_layer(ctx)
    assert p.attention_params == 4 * h * h and p.dense_ffn_params == 3 * h * f
    g = gpu_params(ctx, lay, shape)
    assert g.layer_params[0] == pytest.approx((4 * h * h + 3 * h * f) / 8, rel=1e-12)
    assert g.vocab_params[0] == pytest.approx(2 * v * h / 8, rel=1e-12)
    assert g.total_params[0] == pytest.approx(32 * (4 * h * h + 3 * h * f) / 8 + 2 * v * h / 8, rel=1e-12)


def test_pipelined_first_stage_holds_the_embedding_only() -> None:
    ctx, lay, shape = build(dense_doc(tp=8, pp=4, gb=64))
    assert gpu_params(ctx, lay, shape).vocab_params[0] == pytest.approx(32000.0 * 4096 / 8, rel=1e-12)


def test_routed_experts_split_over_ep_and_replicate_the_router() -> None:
    """MOE_22B: 16 experts over EP 8 = 2 local + 1 shared expert FFN (GeLU, 2 h f_e each) + router h E, in 44 of
    48 layers; the rest dense FFN 2 h f."""
    ctx, lay, shape = build(moe_doc(ep=8))
    h, fe, f = 6144.0, 4096.0, 24576.0
    frac = 44 / 48
    g = gpu_params(ctx, lay, shape)
    moe_layer = (2 + 1) * 2 * h * fe + h * 16
    layer = 4 * h * h + (1 - frac) * 2 * h * f + frac * moe_layer
    assert g.layer_params[0] == pytest.approx(layer, rel=1e-12)
    assert g.expert_params[0] == pytest.approx(48 * frac * 2 * 2 * h * fe, rel=1e-12)
