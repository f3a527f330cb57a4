"""The feed-forward block (terms/ffn.py): dense FFN GEMMs and the layer's elementwise traffic; routed experts on
the busiest rank with shared experts and the router."""

from __future__ import annotations

import pytest

from engine.performance.terms.ffn import dense_ffn, moe_ffn
from tests.engine.performance._build import build, dense_doc, gemm_by_hand, hbm_by_hand, moe_doc


def test_dense_swiglu_ffn_is_two_gemms_and_12h_plus_3f_elementwise() -> None:
    """Llama-2-7B (SwiGLU: gate+up 2f wide, down f deep), TP 8 with SP: GEMMs (M x h) @ (h x 2f/t) and
    (M x f/t) @ (f/t x h); elementwise M x 2 B x (12h/t + 3f/t) at HBM speed + 6 launches."""
    ctx, lay, shape = build(dense_doc(tp=8))
    m, h, f, t = 4096.0, 4096.0, 11008.0, 8.0
    ffn = dense_ffn(ctx, lay, shape)
    assert ffn.gemm_s[0] == pytest.approx(gemm_by_hand(ctx, m, h, 2 * f / t) + gemm_by_hand(ctx, m, f / t, h), rel=1e-9)
    assert ffn.elementwise_s[0] == pytest.approx(hbm_by_hand(ctx, m * 2 * (12 * h / t + 3 * f / t)) + 18e-6, rel=1e-9)


def test_routed_experts_run_the_busiest_ranks_tokens_on_grouped_kernels() -> None:
    """E 16 over EP 8 (2 local experts), top-2 of M = 2048 tokens: each local expert gets M e k / E x imb tokens,
    GEMMs at the stack's grouped-kernel factor (Hopper bf16 auto: 0.77); plus 1 shared expert and the router."""
    ctx, lay, shape = build(moe_doc(ep=8))
    m, h, fe = 2048.0, 6144.0, 4096.0
    moe = moe_ffn(ctx, lay, shape)
    imb = moe.busiest_rank_factor[0]
    assert 1.0 < imb < 1.5
    tok = m * 8 * 2 / 16 * imb
    assert moe.expert_tokens[0] == pytest.approx(tok, rel=1e-12)
    routed = (gemm_by_hand(ctx, tok, h, fe, count=2, kernel_eff=0.77)
              + gemm_by_hand(ctx, tok, fe, h, count=2, kernel_eff=0.77))
    assert moe.routed_s[0] == pytest.approx(routed, rel=1e-9)
    assert moe.shared_s[0] == pytest.approx(gemm_by_hand(ctx, m, h, fe) + gemm_by_hand(ctx, m, fe, h), rel=1e-9)
    assert moe.router_s[0] == pytest.approx(gemm_by_hand(ctx, m, h, 16), rel=1e-9)
    assert moe.gemm_s[0] == pytest.approx(routed + moe.shared_s[0] + moe.router_s[0], rel=1e-12)
    # elementwise: 12h replicated + GeLU 2 x f_e per active copy (busy: top_k x imb + shared) + 2 top_k imb h permute
    elems = 12 * h + 2 * fe * (2 * imb + 1) + 2 * 2 * imb * h
    assert moe.elementwise_s[0] == pytest.approx(hbm_by_hand(ctx, m * 2 * elems), rel=1e-9)


def test_allgather_dispatcher_adds_its_gathered_buffer_passes() -> None:
    ctx, lay, shape = build(moe_doc(tp=2, ep=4, dispatcher="allgather"))
    moe = moe_ffn(ctx, lay, shape)
    imb = moe.busiest_rank_factor[0]
    assert moe.permute_elems[0] == pytest.approx(2 * 2 * imb * 6144 / 2 + 2 * 4 * 6144, rel=1e-12)


def test_no_moe_no_expert_work() -> None:
    ctx, lay, shape = build(dense_doc())
    moe = moe_ffn(ctx, lay, shape)
    assert moe.gemm_s[0] == 0.0 and moe.elementwise_s[0] == 0.0 and moe.busiest_rank_factor[0] == 1.0
