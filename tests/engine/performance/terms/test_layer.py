"""One layer's compute (terms/layer.py): forward, backward (2 x GEMMs, 2.5 x attention, 2 x traffic), selective
and full recomputation, fp8 casts, and the output layer."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.terms.attention import attention_core
from engine.performance.terms.ffn import dense_ffn, moe_ffn
from engine.performance.terms.layer import attention_gemms, fp8_casts, layer_compute, logits_compute
from tests.engine.performance._build import build, dense_doc, gemm_by_hand, hbm_by_hand

M, H, F, T = 4096.0, 4096.0, 11008.0, 8.0  # Llama-2-7B, s 4096, b 1, TP 8 with SP


def _layer(**kw):
    ctx, lay, shape = build(dense_doc(tp=8, **kw))
    attn = attention_core(ctx, lay, shape)
    dense = dense_ffn(ctx, lay, shape)
    return ctx, lay, shape, attn, dense, layer_compute(ctx, lay, shape, attn, dense, moe_ffn(ctx, lay, shape))


def test_attention_projections_are_qkv_and_output_gemms() -> None:
    ctx, lay, shape = build(dense_doc(tp=8))
    qkv = gemm_by_hand(ctx, M, H, H / T + 2 * 512)  # Q h/t wide, K and V 512 per rank (32 KV heads / 8)
    out = gemm_by_hand(ctx, M, H / T, H)
    assert attention_gemms(ctx, lay, shape)[0] == pytest.approx(qkv + out, rel=1e-9)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_backward_is_twice_the_gemms_and_traffic_plus_the_attention_backward(recompute: str) -> None:
    ctx, lay, shape, attn, dense, layer = _layer(recompute=recompute)
    gemm = attention_gemms(ctx, lay, shape)[0] + dense.gemm_s[0]
    fwd = gemm + attn.forward_s[0] + dense.elementwise_s[0]
    assert layer.forward_s[0] == pytest.approx(fwd, rel=1e-12)
    assert layer.backward_s[0] == pytest.approx(2 * gemm + attn.backward_s[0] + 2 * dense.elementwise_s[0], rel=1e-12)
    selective = hbm_by_hand(ctx, M * 2 * (4 * H / T + 3 * F / T)) + 9e-6  # LN outputs + SwiGLU output, 3 launches
    assert layer.selective_recompute_s[0] == pytest.approx(selective, rel=1e-9)
    rc = {"none": 0.0, "selective": selective, "full": fwd}[recompute]
    assert layer.recompute_s[0] == pytest.approx(rc, rel=1e-9)
    assert layer.total_s[0] == pytest.approx(layer.forward_s[0] + layer.backward_s[0] + rc, rel=1e-9)


def test_fp8_casts_every_gemm_operand_with_its_transpose() -> None:
    """4 B per element (read bf16, write fp8 and its transpose): forward (ad + f)/t per token, 2 launches; backward
    (ad + 2gd)/t + 2h/t + (k-1) f/t, 4 launches."""
    ctx, lay, shape = build(dense_doc(tp=8, precision="fp8"))
    fwd, bwd = fp8_casts(ctx, lay, shape)
    assert fwd[0] == pytest.approx(hbm_by_hand(ctx, M * 4 * (H / T + F / T)) + 6e-6, rel=1e-9)
    assert bwd[0] == pytest.approx(hbm_by_hand(ctx, M * 4 * ((H + 2 * H) / T + 2 * H / T + 2 * F / T)) + 12e-6,
                                   rel=1e-9)
    ctx16, lay16, shape16 = build(dense_doc(tp=8))
    assert np.all(np.concatenate(fp8_casts(ctx16, lay16, shape16)) == 0.0)


def test_logits_are_three_gemm_passes_and_four_fp32_loss_passes() -> None:
    ctx, lay, shape = build(dense_doc(tp=8))
    v = 32000.0
    gemm = gemm_by_hand(ctx, M, H, v / T)
    logits = logits_compute(ctx, lay, shape)
    assert logits.gemm_s[0] == pytest.approx(gemm, rel=1e-9)
    assert logits.total_s[0] == pytest.approx(3 * gemm + hbm_by_hand(ctx, M * v / T * 4 * 4), rel=1e-9)
