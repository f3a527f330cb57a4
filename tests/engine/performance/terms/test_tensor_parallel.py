"""Tensor-parallel communication (terms/tensor_parallel.py) with the closed-form collective model: per layer 4
all-reduces of the M x h bf16 activation (6 with full recomputation), the framework's share hidden."""

from __future__ import annotations

import pytest

from engine.performance.frameworks import layout_profiles
from engine.performance.terms.tensor_parallel import tensor_parallel_comm
from tests.engine.performance._build import BW, LinearComm, build, dense_doc, moe_doc


def _tp(doc):
    ctx, lay, shape = build(doc)
    comm = LinearComm()
    return ctx, shape, comm, tensor_parallel_comm(ctx, lay, shape, layout_profiles(ctx.framework, lay.tp, lay.pp), comm)


@pytest.mark.parametrize(("recompute", "count"), [("none", 4.0), ("selective", 4.0), ("full", 6.0)])
def test_dense_layer_all_reduces_its_activation_four_times(recompute: str, count: float) -> None:
    _, shape, _, tp = _tp(dense_doc(tp=8, recompute=recompute, framework="megatron-core"))
    m_tok, h = 4096.0, 4096.0  # Llama-2-7B, s 4096, b 1, c 1
    assert shape.microbatch_tokens[0] == m_tok
    pair = 2.0 * m_tok * h * 2.0 / BW  # all-reduce: the buffer twice over the bus
    assert tp.attention_pair_s[0] == pytest.approx(pair, rel=1e-12)
    assert tp.collectives_count[0] == count
    assert tp.hideable_s[0] == pytest.approx(count * pair, rel=1e-12)
    assert tp.exposed_s[0] == pytest.approx(count * pair * (1.0 - 0.3), rel=1e-12)  # Megatron-Core hides 0.3


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
