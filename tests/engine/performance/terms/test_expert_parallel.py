"""Expert-parallel communication (terms/expert_parallel.py) with the closed-form collective model: dispatch and
combine of every routed copy, fp8 one way only, hidden under another micro-batch only in the pipeline's steady
state, and the all-gather dispatcher's pair never hidden."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.performance.frameworks import layout_profiles
from engine.performance.terms.attention import attention_core
from engine.performance.terms.expert_parallel import expert_parallel_comm, steady_state_fraction
from engine.performance.terms.ffn import dense_ffn, moe_ffn
from engine.performance.terms.layer import layer_compute
from engine.performance.terms.tensor_parallel import tensor_parallel_comm
from tests.engine.performance._build import BW, LinearComm, build, moe_doc

F = 44.0 / 48.0  # MoE layers of MOE_22B


def _ep(doc, layer_s: float = 0.0, shared_s: float = 0.0):
    ctx, lay, shape = build(doc)
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    comm = LinearComm()
    attn = attention_core(ctx, lay, shape)
    moe = dataclasses.replace(moe_ffn(ctx, lay, shape), shared_s=np.array([shared_s]))
    layer = dataclasses.replace(layer_compute(ctx, lay, shape, attn, dense_ffn(ctx, lay, shape), moe),
                                total_s=np.array([layer_s]))
    tp = tensor_parallel_comm(ctx, lay, shape, prof, comm)
    return moe, tp, expert_parallel_comm(ctx, lay, shape, prof, comm, tp, moe, layer)


def test_dispatch_and_combine_move_every_routed_copy_forward_and_backward() -> None:
    """Named framework (no EP overlap): exposed = f x 2 pairs x (dispatch + combine), each top_k (2) copies of
    M x imb tokens x h x 2 B (bf16 both ways)."""
    moe, _, ep = _ep(moe_doc(ep=8, framework="megatron-core", dispatcher="alltoall"))
    tokens = 2048.0 * moe.busiest_rank_factor[0]
    one_way = tokens * 6144 * 2.0 * 2 / BW
    assert ep.dispatch_s[0] == pytest.approx(one_way, rel=1e-12)
    assert ep.combine_s[0] == pytest.approx(one_way, rel=1e-12)
    assert ep.raw_s[0] == pytest.approx(F * 2.0 * 2.0 * one_way, rel=1e-12)
    assert ep.exposed_s[0] == pytest.approx(ep.raw_s[0], rel=1e-12) and ep.hidden_s[0] == 0.0


def test_full_recompute_adds_a_forward_pair() -> None:
    moe, _, ep = _ep(moe_doc(ep=8, framework="megatron-core", dispatcher="alltoall", recompute="full"))
    one_way = 2048.0 * moe.busiest_rank_factor[0] * 6144 * 2.0 * 2 / BW
    assert ep.raw_s[0] == pytest.approx(F * 3.0 * 2.0 * one_way, rel=1e-12)


def test_auto_hides_it_under_the_partner_microbatch_in_the_steady_state() -> None:
    """p = 2, m = 8: 7 of 8 slots have a partner (compute 1 s hides everything there); the other slot hides under
    the shared experts only (3 x their forward)."""
    doc = moe_doc(ep=8, pp=2, gb=256)
    _, _, ep = _ep(doc, layer_s=1.0, shared_s=0.0)
    steady = (8.0 - 1.0) / 8.0
    assert ep.steady_fraction[0] == pytest.approx(steady)
    assert ep.exposed_s[0] == pytest.approx((1.0 - steady) * ep.raw_s[0], rel=1e-12)
    _, _, with_shared = _ep(doc, layer_s=1.0, shared_s=1.0)
    assert with_shared.exposed_s[0] == 0.0


def test_steady_state_needs_pipelining_and_two_microbatches() -> None:
    _, lay, _ = build(moe_doc(ep=8, pp=2, gb=256))
    assert steady_state_fraction(lay, np.array([8.0]))[0] == pytest.approx(7.0 / 8.0)
    assert steady_state_fraction(lay, np.array([1.0]))[0] == 0.0
    _, lay1, _ = build(moe_doc(ep=8, pp=1))
    assert steady_state_fraction(lay1, np.array([8.0]))[0] == 0.0


def test_allgather_dispatcher_with_ep_is_expert_traffic_never_hidden() -> None:
    """Per MoE layer 2 pairs (4 collectives / 2 sides) of the TP x EP all-reduce."""
    _, tp, ep = _ep(moe_doc(tp=2, ep=4, dispatcher="allgather"))
    assert ep.exposed_s[0] == pytest.approx(F * 2.0 * tp.dispatch_pair_s[0], rel=1e-12)
    assert ep.hidden_s[0] == 0.0


@pytest.mark.parametrize("precision, gpu, dispatch_bytes", [("bf16", "B200", 2.0), ("fp8", "B200", 1.0),
                                                           ("mxfp8", "B200", 1.0), ("nvfp4", "B200", 1.0)])
def test_dispatch_sends_fp8_in_any_quantised_format_never_sub_byte(precision: str, gpu: str,
                                                                    dispatch_bytes: float) -> None:
    """Dispatch: M x imb tokens x h x (2 B bf16, 1 B in fp8 / MXFP8 / NVFP4); combine always bf16."""
    doc = moe_doc(ep=8, framework="megatron-core", dispatcher="alltoall")
    doc["training"]["precision"] = precision
    doc["cluster"]["gpu"] = gpu
    moe, _, ep = _ep(doc)
    tokens = 2048.0 * moe.busiest_rank_factor[0]
    assert ep.dispatch_s[0] == pytest.approx(tokens * 6144 * dispatch_bytes * 2 / BW, rel=1e-12)
    assert ep.combine_s[0] == pytest.approx(tokens * 6144 * 2.0 * 2 / BW, rel=1e-12)
