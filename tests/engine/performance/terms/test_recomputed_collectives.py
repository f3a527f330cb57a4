"""Full recomputation reruns each checkpointed layer's forward, and its forward collectives with it
(terms/shape.recomputed_forwards): the tensor-parallel pairs, the MoE dispatch and combine, and the context-parallel
exchange (the ring's K/V all-gather, Ulysses' Q/K/V/output all-to-all), on the share of the layers
training.recompute_layers checkpoints. Counts written out by hand against the closed-form collective model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.performance.frameworks import layout_profiles
from engine.performance.terms.attention import attention_core
from engine.performance.terms.context_parallel import context_parallel_comm
from engine.performance.terms.tensor_parallel import tensor_parallel_comm
from tests.engine.performance._build import BW, LinearComm, build, dense_doc, moe_doc
from tests.engine.performance.terms.test_expert_parallel import F, _ep

M_TOK, H = 4096.0, 4096.0  # Llama-2-7B, s 4096, b 1
PAIR = 2.0 * M_TOK * H * 2.0 / BW  # all-reduce of the M x h bf16 activation
KV = 4096 * 2 * 512 * 2.0  # K and V of the whole sequence, 32 KV heads of 128 over TP 8, bf16


def _cp(recompute: str, kind: str = "p2p", attn_s: float = 0.0, **training):
    doc = dense_doc(tp=8, cp=4, gpus=64, gb=16, recompute=recompute, **training)
    doc["training"]["cp_comm_type"] = kind
    ctx, lay, shape = build(doc)
    attn = dataclasses.replace(attention_core(ctx, lay, shape), forward_s=np.array([attn_s]),
                               backward_s=np.array([2.5 * attn_s]))
    return context_parallel_comm(ctx, lay, shape, attn, LinearComm())


def test_the_ring_gathers_k_and_v_again_in_the_recomputed_forward() -> None:
    """3 all-gathers of the whole sequence's K and V (forward; dK, dV backward), 4 with full recomputation."""
    assert _cp("none").raw_s[0] == pytest.approx(3.0 * KV / BW, rel=1e-12)
    assert _cp("full").raw_s[0] == pytest.approx(4.0 * KV / BW, rel=1e-12)


def test_the_recomputed_attention_is_a_window_for_the_ring_too() -> None:
    """Attention forward a, backward 2.5a, recomputed forward a: the ring of 4 gathers hides under 4.5a (at least
    a tenth of it stays exposed)."""
    raw = 4.0 * KV / BW
    comm = _cp("full", attn_s=raw / 5.0)
    assert comm.exposed_s[0] == pytest.approx(raw - 4.5 * raw / 5.0, rel=1e-9)
    assert _cp("full", attn_s=raw).exposed_s[0] == pytest.approx(0.1 * raw, rel=1e-12)


def test_ulysses_exchanges_once_more_in_the_recomputed_forward() -> None:
    """All-to-all form at CP 4: each exchange moves b s / c tokens x (Q + K + V + output, 4 x h/t) x 2 B; two per
    layer, three with full recomputation."""
    one = (4096 / 4) * 4.0 * H / 8 * 2.0 / BW
    assert _cp("none", "a2a").raw_s[0] == pytest.approx(2.0 * one, rel=1e-12)
    assert _cp("full", "a2a").raw_s[0] == pytest.approx(3.0 * one, rel=1e-12)


def test_recompute_layers_reruns_the_collectives_of_its_share_of_the_layers() -> None:
    """training.recompute_layers 8 of a 32-layer chunk: a quarter of the layers rerun their forward. Tensor
    parallelism (Megatron-LM of 2021-04: every pair exposed, no SP) 4 + 2/4 pairs; the ring 3 + 1/4 gathers."""
    doc = dense_doc(tp=8, recompute="full", sp=False, framework="megatron-core", recompute_layers=8)
    ctx, lay, shape = build(doc)
    tp = tensor_parallel_comm(ctx, lay, shape, layout_profiles(ctx.framework, lay.tp, lay.pp, "2021-04"),
                              LinearComm())
    assert tp.collectives_count[0] == pytest.approx(4.5)
    assert tp.exposed_s[0] == pytest.approx(4.5 * PAIR, rel=1e-12)
    assert _cp("full", recompute_layers=8).raw_s[0] == pytest.approx(3.25 * KV / BW, rel=1e-12)


def test_recompute_layers_reruns_the_expert_pairs_of_its_share() -> None:
    """MoE dispatch + combine: 2 pairs a layer, 2 + 1 with full recomputation of every layer, 2 + 1/4 when a
    quarter of each chunk's layers is checkpointed (48-layer model, recompute_layers 12)."""
    doc = moe_doc(ep=8, framework="megatron-core", dispatcher="alltoall", recompute="full")
    doc["training"]["recompute_layers"] = 12
    moe, _, ep = _ep(doc)
    one_way = 2048.0 * moe.busiest_rank_factor[0] * 6144 * 2.0 * 2 / BW
    assert ep.raw_s[0] == pytest.approx(F * 2.25 * 2.0 * one_way, rel=1e-12)
