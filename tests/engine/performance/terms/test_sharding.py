"""ZeRO sharding (terms/sharding.py): ZeRO-3's per-micro-batch gathers and its unsharded buffers, each against its
equation written out here (docs/performance-model.md s.3 and s.6), chosen so that halving or doubling fails."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.frameworks import layout_profiles
from engine.performance.terms.groups import fabric_groups
from engine.performance.terms.sharding import (
    COLLECTIVE_LAUNCH_S,
    parameter_tensors,
    shard_ranks,
    state_bytes,
    zero2_traffic,
    zero3_buffer_bytes,
    zero3_traffic,
)
from tests.engine._scenarios import LLAMA_7B
from tests.engine.performance._build import BW, LinearComm, build, dense_doc, moe_doc

LAYER_PARAMS = 2.0e8  # per GPU

VOCAB_PARAMS = 5.0e8


def _zero3(zero: int = 3, gpus: int = 64, tp: int = 8, compute: float = 0.0, framework: str = "auto"):
    ctx, lay, shape = build(dense_doc(tp=tp, gpus=gpus, zero=zero, framework=framework))
    comm = LinearComm()
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    z3 = zero3_traffic(lay, shape, prof, comm, np.array([LAYER_PARAMS]), np.array([VOCAB_PARAMS]), np.array([compute]))
    return ctx, lay, shape, comm, z3


def test_zero3_gathers_each_layer_twice_and_reduce_scatters_once_per_microbatch() -> None:
    """Per micro-batch every layer's bf16 weights are all-gathered for the forward and again for the backward, and
    its gradients reduce-scattered: 3 x (P_layer x 2 B) per layer; the vocabulary matrices likewise."""
    _, _, shape, comm, z3 = _zero3()
    layers = 32.0  # Llama-2-7B, no pipelining: the one stage holds every layer
    assert shape.stage_layers[0] == layers
    gather = LAYER_PARAMS * 2.0 / BW
    assert z3.layer_gather_s[0] == pytest.approx(gather, rel=1e-12)
    assert z3.layer_reduce_scatter_s[0] == pytest.approx(gather, rel=1e-12)
    assert z3.per_layer_s[0] == pytest.approx(3.0 * gather, rel=1e-12)
    vocab = 3.0 * VOCAB_PARAMS * 2.0 / BW
    assert z3.vocab_s[0] == pytest.approx(vocab, rel=1e-12)
    assert z3.per_microbatch_s[0] == pytest.approx(layers * 3.0 * gather + vocab, rel=1e-12)
    kinds = [(group, kind) for group, kind, _ in comm.calls]
    assert kinds.count(("shard", CollectiveKind.ALL_GATHER)) == 2  # the layer's and the vocabulary's (shard = d c)
    assert kinds.count(("shard", CollectiveKind.REDUCE_SCATTER)) == 1


def test_zero3_exposes_what_compute_cannot_hide_plus_the_first_layers_gather() -> None:
    """One layer prefetched: the first layer's collectives (per_layer / prefetch depth 1) are never hidden."""
    gather = LAYER_PARAMS * 2.0 / BW
    per_mb = 32.0 * 3.0 * gather + 3.0 * VOCAB_PARAMS * 2.0 / BW
    _, _, _, _, hidden_all = _zero3(compute=10.0 * per_mb)
    assert hidden_all.floor_s[0] == pytest.approx(3.0 * gather, rel=1e-12)
    assert hidden_all.exposed_s[0] == pytest.approx(3.0 * gather, rel=1e-12)
    _, _, _, _, no_compute = _zero3(compute=0.0)
    assert no_compute.exposed_s[0] == pytest.approx(per_mb + 3.0 * gather, rel=1e-12)


def test_zero3_traffic_is_zero_below_stage_3_or_without_data_parallelism() -> None:
    assert _zero3(zero=2)[4].per_microbatch_s[0] == 0.0
    assert _zero3(zero=2)[4].floor_s[0] == 0.0
    assert _zero3(gpus=8, tp=8)[4].per_microbatch_s[0] == 0.0  # d c = 1


def test_zero3_gather_on_the_fabric_is_one_nvlink_ring_all_gather() -> None:
    """With the real collective model: 8 data-parallel ranks inside one H100 node, one layer's weights (400 MB)
    gathered by a ring over NVLink: Simple protocol, 9 us + 7 steps x (1 + 1.5) us + 7/8 x 400 MB / (450 GB/s x
    0.82)."""
    ctx, lay, shape = build(dense_doc(tp=1, gpus=8, gb=8, zero=3, sp=False))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    z3 = zero3_traffic(lay, shape, prof, fabric_groups(ctx, lay), np.array([LAYER_PARAMS]), np.array([VOCAB_PARAMS]),
                       np.array([0.0]))
    nbytes = LAYER_PARAMS * 2.0
    ring = 9e-6 + 7 * (1e-6 + 1.5e-6) + 7.0 / 8.0 * nbytes / (450e9 * 0.82)
    assert z3.layer_gather_s[0] == pytest.approx(ring, rel=1e-9)
    assert z3.per_layer_s[0] == pytest.approx(3.0 * ring, rel=1e-9)


def test_zero3_buffers_hold_three_unsharded_layers_in_bf16() -> None:
    """The layer computing, the one prefetched and the one whose gradients are reduced: 3 x P_layer x 2 B."""
    _, lay3, _ = build(dense_doc(zero=3))
    _, lay2, _ = build(dense_doc(zero=2))
    assert zero3_buffer_bytes(lay3, np.array([LAYER_PARAMS]))[0] == pytest.approx(3.0 * LAYER_PARAMS * 2.0, rel=1e-12)
    assert zero3_buffer_bytes(lay2, np.array([LAYER_PARAMS]))[0] == 0.0


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_model_states_are_sharded_by_stage(zero: int) -> None:
    """bf16 weights 2 B, fp32 gradients 4 B, fp32 master + Adam m + v 12 B per parameter; ZeRO-1 shards the 12 B,
    ZeRO-2 also the gradients (where the framework keeps only its partition: auto does), ZeRO-3 also the weights."""
    ctx, lay, shape = build(dense_doc(zero=zero))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    d, p = 8.0, 1.0e9
    per_param = {0: 2 + 4 + 12, 1: 2 + 4 + 12 / d, 2: 2 + 4 / d + 12 / d, 3: 2 / d + 4 / d + 12 / d}[zero]
    assert state_bytes(lay, prof, np.array([p]), shape.grad_reduce_ranks)[0] == pytest.approx(p * per_param, rel=1e-12)
    assert shard_ranks(lay, 1.0, shape.grad_reduce_ranks)[0] == (d if zero >= 1 else 1.0)


def test_megatron_zero2_keeps_the_full_gradient_buffer() -> None:
    """A named Megatron-Core profile reduces once per step into a full fp32 buffer: ZeRO-2 costs what ZeRO-1 does."""
    ctx, lay, shape = build(dense_doc(zero=2, framework="megatron-core"))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    assert state_bytes(lay, prof, np.array([1.0]), shape.grad_reduce_ranks)[0] == pytest.approx(2 + 4 + 12 / 8.0)


def test_zero2_per_microbatch_reduction_hides_under_the_backward_but_its_last_bucket() -> None:
    ctx, lay, _ = build(dense_doc(tp=1, gpus=8, gb=8, zero=2, sp=False, framework="fsdp"))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    grad, bucket = np.array([0.4]), np.array([0.1])
    long_bwd = zero2_traffic(prof, grad, np.array([True]), bucket, np.array([10.0]))
    assert long_bwd.per_microbatch_s[0] == 0.4
    assert long_bwd.floor_s[0] == pytest.approx(0.04) and long_bwd.exposed_s[0] == pytest.approx(0.04)
    short_bwd = zero2_traffic(prof, grad, np.array([True]), bucket, np.array([0.1]))
    assert short_bwd.exposed_s[0] == pytest.approx(0.3)
    assert zero2_traffic(prof, grad, np.array([False]), bucket, np.array([0.1])).per_microbatch_s[0] == 0.0


# ---- software as it ran (issue #22): how each framework issues ZeRO-3's collectives, by release


def _zero3_at(framework: str, release: str | None, compute: float, layer_params: float = LAYER_PARAMS,
              vocab_params: float = VOCAB_PARAMS):
    training = {"framework": framework} | ({"framework_release": release} if release else {})
    ctx, lay, shape = build(dense_doc(tp=8, gpus=64, zero=3, **training))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, ctx.framework_release)
    return zero3_traffic(lay, shape, prof, LinearComm(), np.array([layer_params]), np.array([vocab_params]),
                         np.array([compute]), parameter_tensors(ctx, lay))


def test_parameter_tensors_are_counted_from_the_model_shape() -> None:
    """Llama-style (gated, no biases): q, k, v, o, gate, up, down, 2 RMSNorm weights = 9; GPT-style: fused QKV,
    proj, fc1, fc2 weight + bias and 2 LayerNorms weight + bias = 12; MoE layers replace the FFN's 4 by the router
    and (16 / ep + 1 shared) experts x 4, averaged with the 4 dense layers of 48."""
    ctx, lay, _ = build(dense_doc())
    assert parameter_tensors(ctx, lay)[0] == 9.0
    ctx, lay, _ = build(dense_doc(model={**LLAMA_7B, "gated_ffn": False}))
    assert parameter_tensors(ctx, lay)[0] == 12.0
    ctx, lay, _ = build(moe_doc(tp=1, ep=8))
    moe_layer = 12.0 - 4.0 + 1.0 + (16.0 / 8.0 + 1.0) * 4.0
    assert parameter_tensors(ctx, lay)[0] == pytest.approx((4 * 12.0 + 44 * moe_layer) / 48.0, rel=1e-12)


def test_deepspeed_2021_gathers_each_parameter_tensor_synchronously() -> None:
    """DeepSpeed ZeRO-3 before PR #1453 (2022-01): per layer, 2 x 9 all-gathers of one tensor each (P/9 parameters),
    each followed by a synchronize, so its time and its launch are exposed; the 9 reduce-scatters run under the
    backward. g = 2P B / BW; gathers 2 (g + 9 L); exposed with a long compute = 32 layers x 2 (g + 9 L)."""
    z3 = _zero3_at("deepspeed", "2021-06", compute=10.0)
    g = LAYER_PARAMS * 2.0 / BW
    gathers = 2.0 * (g + 9.0 * COLLECTIVE_LAUNCH_S)
    assert z3.gathers_per_layer_count[0] == 9.0 and z3.reduce_scatters_per_layer_count[0] == 9.0
    assert z3.layer_gather_s[0] == pytest.approx(g, rel=1e-12)
    assert z3.per_layer_s[0] == pytest.approx(gathers + g, rel=1e-12)
    assert z3.floor_s[0] == pytest.approx(32.0 * gathers, rel=1e-12)
    assert z3.exposed_s[0] == pytest.approx(32.0 * gathers, rel=1e-12)
    # no compute: the reduce-scatters and the vocabulary's collectives are exposed as well
    z0 = _zero3_at("deepspeed", "2021-06", compute=0.0)
    assert z0.exposed_s[0] == pytest.approx(32.0 * (gathers + g) + 3.0 * VOCAB_PARAMS * 2.0 / BW, rel=1e-12)


def test_a_2021_deepspeed_zero3_run_is_slower_than_a_2024_one_by_the_closed_form() -> None:
    """Same layout, compute long enough to hide every bucketed collective: 2024 (PR #1453's buckets of 5e7
    parameters, 4 per layer of 2e8, one layer prefetched) exposes the first layer's 3 g; 2021 exposes every
    per-tensor gather: 64 (g + 9 L). The difference is the closed form, the launches' share 576 L."""
    old, new = _zero3_at("deepspeed", "2021-06", 10.0), _zero3_at("deepspeed", "2024-06", 10.0)
    g = LAYER_PARAMS * 2.0 / BW
    assert new.gathers_per_layer_count[0] == 4.0 and new.reduce_scatters_per_layer_count[0] == 1.0
    assert new.exposed_s[0] == pytest.approx(3.0 * g, rel=1e-12)
    assert old.exposed_s[0] - new.exposed_s[0] == pytest.approx(64.0 * (g + 9.0 * COLLECTIVE_LAUNCH_S) - 3.0 * g,
                                                                rel=1e-12)


def test_bucketed_gathers_are_bound_by_their_launches_when_compute_is_short() -> None:
    """Tiny layers at a small per-GPU batch: the host issues (2 k_g + k_r) collectives per layer plus the 3 of the
    vocabulary at L each; with compute shorter than that, the launches (not the bytes) are exposed. FSDP: one
    gather per layer (k_g = k_r = 1); DeepSpeed 2024: ceil(P / 5e7) = 1 here as well."""
    tiny = 1.0e3
    launches = (32.0 * 3.0 + 3.0) * COLLECTIVE_LAUNCH_S
    comm = 32.0 * 3.0 * tiny * 2.0 / BW + 3.0 * tiny * 2.0 / BW
    floor = 3.0 * tiny * 2.0 / BW
    compute = 1.0e-3
    z3 = _zero3_at("fsdp", None, compute, layer_params=tiny, vocab_params=tiny)
    assert z3.launch_s[0] == pytest.approx(launches, rel=1e-12)
    assert z3.exposed_s[0] == pytest.approx(max(comm, launches) - compute + floor, rel=1e-12)
    assert launches > comm  # the launches bind, not the bytes


def test_zero3_differs_by_framework_where_their_sources_do() -> None:
    """DeepSpeed gathers in stage3_prefetch_bucket_size buckets (5e7: 4 collectives for a 2e8-parameter layer);
    FSDP, FSDP2 and Megatron-Core (FSDP2 / Megatron-FSDP) one per layer. Same bytes, more launches."""
    ds, fsdp, mcore = (_zero3_at(f, None, 0.0) for f in ("deepspeed", "fsdp", "megatron-core"))
    assert ds.gathers_per_layer_count[0] == 4.0 and fsdp.gathers_per_layer_count[0] == 1.0
    assert mcore.gathers_per_layer_count[0] == 1.0
    assert ds.launch_s[0] - fsdp.launch_s[0] == pytest.approx(32.0 * 2.0 * 3.0 * COLLECTIVE_LAUNCH_S, rel=1e-12)
