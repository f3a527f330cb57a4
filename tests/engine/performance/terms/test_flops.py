"""FLOP counts (terms/flops.py): model FLOPs are 3 x forward; recomputation adds hardware FLOPs only."""

from __future__ import annotations

import pytest

from engine.performance.terms.attention import unfused_attention
from engine.performance.terms.flops import flops_per_token, step_flops
from tests.engine._scenarios import GPT_22B
from tests.engine.performance._build import build, dense_doc

# GPT-22B: L 48, h 6144, a 64, f 4h, V 51200, s 2048
L, H, S, V = 48, 6144.0, 2048.0, 51200.0


def test_forward_flops_per_token_follow_narayanan() -> None:
    """Per layer 24 h^2 (QKV + output 8h^2, FFN 16h^2) + 4 s h (attention core); logits 2 h V."""
    ctx, _, _ = build(dense_doc(model=GPT_22B, tp=8))
    f = flops_per_token(ctx)
    assert f.attention_core_flops == pytest.approx(L * 4 * S * H, rel=1e-12)
    assert f.layers_flops == pytest.approx(L * (24 * H * H + 4 * S * H), rel=1e-12)
    assert f.forward_flops == pytest.approx(L * (24 * H * H + 4 * S * H) + 2 * H * V, rel=1e-12)


@pytest.mark.parametrize(("recompute", "attention", "extra"), [
    ("none", "flash", 0.0), ("selective", "flash", 0.0), ("full", "flash", 1.0), ("selective", "unfused", 0.5)])
def test_recomputation_adds_hardware_flops_only(recompute: str, attention: str, extra: float) -> None:
    """full: + the layers' forward; selective: nothing with flash, the attention core with unfused attention."""
    ctx, lay, _ = build(dense_doc(model=GPT_22B, tp=8, recompute=recompute, attention=attention))
    tokens = 64 * S
    fwd = L * (24 * H * H + 4 * S * H) + 2 * H * V
    sf = step_flops(ctx, lay.recompute, unfused_attention(ctx, lay.cp))
    assert sf.model_flops[0] == pytest.approx(3 * fwd * tokens, rel=1e-12)
    added = {0.0: 0.0, 1.0: L * (24 * H * H + 4 * S * H), 0.5: L * 4 * S * H}[extra]
    assert sf.hardware_flops[0] == pytest.approx(3 * fwd * tokens + added * tokens, rel=1e-12)


def test_a_sliding_window_counts_min_window_seq_keys_per_query() -> None:
    """GPT-22B with a 512-token window: the attention core counts 4 x 512 x h per token per layer (not 4 s h); the
    projections, FFN and logits do not change."""
    full = flops_per_token(build(dense_doc(model=GPT_22B, tp=8))[0])
    ctx, _, _ = build(dense_doc(model=dict(GPT_22B, attention_window=512), tp=8))
    f = flops_per_token(ctx)
    assert f.attention_core_flops == pytest.approx(L * 4 * 512.0 * H, rel=1e-12)
    assert f.forward_flops == pytest.approx(full.forward_flops - L * 4 * (S - 512.0) * H, rel=1e-12)
