"""Tensor-parallel communication (terms/tensor_parallel.py) with the closed-form collective model: per layer 4
all-reduces of the M x h bf16 activation (6 with full recomputation), what the stack hides as its source does."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.frameworks import layout_profiles
from engine.performance.model import step_terms
from engine.performance.terms.tensor_parallel import tensor_parallel_comm
from tests.engine.performance._build import BW, LinearComm, build, dense_doc, moe_doc


def _tp(doc):
    ctx, lay, shape = build(doc)
    comm = LinearComm()
    return ctx, shape, comm, tensor_parallel_comm(ctx, lay, shape, layout_profiles(ctx.framework, lay.tp, lay.pp), comm)


def _tp_at(doc, release: str | None, backward_gemm_s: float | None = None):
    ctx, lay, shape = build(doc)
    comm = LinearComm()
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, release)
    window = None if backward_gemm_s is None else (np.array([backward_gemm_s]), np.array([backward_gemm_s]))
    return tensor_parallel_comm(ctx, lay, shape, prof, comm, window)


M_TOK, H = 4096.0, 4096.0  # Llama-2-7B, s 4096, b 1, c 1
PAIR = 2.0 * M_TOK * H * 2.0 / BW  # all-reduce of the M x h bf16 activation: the buffer twice over the bus


@pytest.mark.parametrize(("recompute", "count"), [("none", 4.0), ("selective", 4.0), ("full", 6.0)])
def test_dense_layer_all_reduces_its_activation_four_times(recompute: str, count: float) -> None:
    """Megatron-LM of April 2021 (before its asynchronous backward, no sequence parallelism): every pair exposed."""
    _, shape, _, _ = _tp(dense_doc(tp=8, recompute=recompute, framework="megatron-core"))
    assert shape.microbatch_tokens[0] == M_TOK
    tp = _tp_at(dense_doc(tp=8, recompute=recompute, sp=False, framework="megatron-core"), "2021-04")
    assert tp.attention_pair_s[0] == pytest.approx(PAIR, rel=1e-12)
    assert tp.collectives_count[0] == count
    assert tp.hideable_s[0] == pytest.approx(count * PAIR, rel=1e-12)
    assert tp.exposed_s[0] == pytest.approx(count * PAIR, rel=1e-12)
    assert tp.hidden_s[0] == 0.0


@pytest.mark.parametrize(("recompute", "count"), [("none", 4.0), ("full", 6.0)])
def test_megatron_async_backward_hides_one_pair_a_side(recompute: str, count: float) -> None:
    """From 2021-09 each side's column-parallel backward all-reduces the input gradient under the weight-gradient
    GEMM: 2 of the layer's pairs hidden. With sequence parallelism the backward also re-gathers each side's input
    (half a pair, hidden under the data-gradient GEMM) and exposes the output gradient's all-gather (half a pair):
    traffic count + 1, hidden 2, exposed count - 1 (a forward, a recomputed forward and half the backward)."""
    no_sp = _tp_at(dense_doc(tp=8, recompute=recompute, sp=False, framework="megatron-core"), "2021-10")
    assert no_sp.hideable_s[0] == pytest.approx(count * PAIR, rel=1e-12)
    assert no_sp.hidden_s[0] == pytest.approx(2.0 * PAIR, rel=1e-12)
    assert no_sp.exposed_s[0] == pytest.approx((count - 2.0) * PAIR, rel=1e-12)
    sp = _tp_at(dense_doc(tp=8, recompute=recompute, framework="megatron-core"), None)
    assert sp.hideable_s[0] == pytest.approx((count + 1.0) * PAIR, rel=1e-12)
    assert sp.hidden_s[0] == pytest.approx(2.0 * PAIR, rel=1e-12)
    assert sp.exposed_s[0] == pytest.approx((count - 1.0) * PAIR, rel=1e-12)


def test_the_backward_hides_no_more_than_its_gemms_last() -> None:
    """Backward windows of a quarter pair on each side hide a quarter pair each; the rest of the two is exposed."""
    tp = _tp_at(dense_doc(tp=8, sp=False, framework="megatron-core"), None, backward_gemm_s=0.25 * PAIR)
    assert tp.hidden_s[0] == pytest.approx(0.5 * PAIR, rel=1e-12)
    assert tp.exposed_s[0] == pytest.approx(3.5 * PAIR, rel=1e-12)


def test_nemo_userbuffers_hide_their_share_of_every_pair() -> None:
    """NeMo (Transformer Engine userbuffers): 0.6 of the four pairs, no separate asynchronous-backward path."""
    tp = _tp_at(dense_doc(tp=8, framework="nemo"), None)
    assert tp.hideable_s[0] == pytest.approx(4.0 * PAIR, rel=1e-12)
    assert tp.hidden_s[0] == pytest.approx(0.6 * 4.0 * PAIR, rel=1e-12)
    assert tp.exposed_s[0] == pytest.approx(0.4 * 4.0 * PAIR, rel=1e-12)


def test_moe_layers_gather_every_routed_copy_and_tp_overlap_cannot_hide_it() -> None:
    """All-to-all dispatcher with TP 2: the FFN-side pair of an MoE layer carries top_k (2) + 1 shared copy."""
    _, _, _, tp = _tp(moe_doc(tp=2, ep=8, framework="nemo"))
    m_tok, h, f = 2048.0, 6144.0, 44.0 / 48.0
    pair = 2.0 * m_tok * h * 2.0 / BW
    assert tp.ffn_pair_s[0] == pytest.approx(3.0 * pair, rel=1e-12)
    hideable = 2.0 * (pair + (1.0 - f) * pair)  # 4 collectives, half per side; MoE layers' FFN side not hideable
    assert tp.hideable_s[0] == pytest.approx(hideable, rel=1e-12)
    assert tp.exposed_s[0] == pytest.approx(hideable * (1.0 - 0.6) + 2.0 * f * 3.0 * pair, rel=1e-12)


def test_allgather_dispatcher_gathers_over_tp_times_ep() -> None:
    """One AG + RS pair (an all-reduce's cost) of M x e tokens over the t e ranks; with e > 1 it is expert
    traffic (expert_parallel.py), so the TP term's MoE side is empty."""
    _, _, comm, tp = _tp(moe_doc(tp=2, ep=4, dispatcher="allgather"))
    m_tok, h = 2048.0, 6144.0
    assert tp.dispatch_pair_s[0] == pytest.approx(2.0 * m_tok * 4 * h * 2.0 / BW, rel=1e-12)
    assert tp.ffn_pair_s[0] == 0.0
    assert tp.shared_pair_s[0] == pytest.approx(tp.attention_pair_s[0])  # shared experts: ordinary TP layers
    assert ("tp_ep", "ar", m_tok * 4 * h * 2.0) in [(g, str(k), b) for g, k, b in comm.calls]


def _step_tp(model: dict | None):
    ctx, lay, _ = build(dense_doc(tp=8, framework="megatron-core", model=model))
    terms = step_terms(ctx, lay)
    # dgrad + wgrad of each side's TP linears: the attention projections, the dense FFN
    return terms.tensor_parallel, 2.0 * terms.layer.attention_gemms_s[0], 2.0 * terms.dense_ffn.gemm_s[0]


def test_the_backward_hides_under_its_own_gemms_only() -> None:
    """In the step model each side's hidden pair is capped by that side's backward GEMMs: a 7B layer's GEMMs
    outlast its NVLink pairs; a 512-wide toy layer's attention projections do not, and hide only what they last."""
    tp, attn, ffn = _step_tp(None)
    pair = tp.attention_pair_s[0]
    assert min(attn, ffn) > pair
    assert tp.under_backward_gemms_s[0] == pytest.approx(2.0 * pair, rel=1e-12)
    toy = {"name": "toy", "layers": 4, "hidden": 512, "heads": 8, "ffn_hidden": 2048, "vocab": 32000, "seq_len": 256}
    tp, attn, ffn = _step_tp(toy)
    pair = tp.attention_pair_s[0]
    assert attn < pair
    assert tp.under_backward_gemms_s[0] == pytest.approx(attn + min(pair, ffn), rel=1e-12)
