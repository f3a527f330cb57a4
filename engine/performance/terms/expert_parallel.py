"""Expert-parallel communication of one layer, one micro-batch: the MoE token dispatch and combine.

All-to-all dispatcher: dispatch + combine forward and backward (+ forward again with full recomputation), each
deduplicated per destination node (collectives/moe_dispatch.py). Dispatch-direction transfers feed expert GEMMs
and are sent in fp8 (1 B) whenever the GEMMs are quantised (:func:`dispatch_elem_bytes`; DeepSeek-V3 Sec. 3.3, DeepEP,
Transformer Engine); combine-direction
transfers are weighted sums over top_k and stay bf16. The busiest EP rank receives and returns ``imb`` times the
mean share (moe_balance.py).

Overlap. In the steady state of a pipelined schedule (1F1B, interleaved, DualPipe) a stage alternates the forward
of one micro-batch with the backward of another: the all-to-all of one runs under the other's compute (DeepSeek-V3
DualPipe, Megatron-Core's EP-communication overlap). Warm-up and cool-down slots, (p-1) of the m micro-batches,
have no partner; there, and without pipelining, only the shared experts (independent of the routed tokens) run
under the dispatch (DeepSeek-V2 Sec. 3.1.3). A stack without EP overlap exposes the whole all-to-all.

All-gather dispatcher with e > 1: its AG + RS over TP x EP (tensor_parallel.py) is the expert traffic, never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.context import Context, Layouts
from engine.performance.datatypes import BF16_BYTES, BYTES_ACT, FP8_BYTES
from engine.performance.frameworks import LayoutProfiles
from engine.performance.terms.ffn import MoeFfn
from engine.performance.terms.groups import GroupComm
from engine.performance.terms.kernels import BWD_GEMM_FACTOR
from engine.performance.terms.layer import LayerCompute
from engine.performance.terms.shape import LayoutShape, recomputed_forwards
from engine.performance.terms.tensor_parallel import TP_SIDES, TensorParallelComm
from engine.units import Count, Ratio, Seconds

EP_ALLTOALL_PAIRS = 2.0  # dispatch + combine, forward and backward
EP_ALLTOALL_PAIRS_FULL_RECOMPUTE = 1.0  # the recomputed forward's pair
MIN_STEADY_MICROBATCHES = 2.0  # a steady state needs two micro-batches in flight
# The shared experts' window: their forward and backward (2 x forward) run independently of the routed tokens.
SHARED_EXPERT_PASSES = 1.0 + BWD_GEMM_FACTOR


@dataclass(frozen=True)
class ExpertParallelComm:
    """Per layer and micro-batch (averaged over dense and MoE layers)."""

    dispatch_s: Seconds  # one dispatch all-to-all of an MoE layer (busiest rank)
    combine_s: Seconds  # one combine all-to-all
    raw_s: Seconds  # all of them, per layer
    steady_fraction: Ratio  # micro-batch slots in the pipeline's steady state
    exposed_s: Seconds  # alone (before the shared timeline)
    hidden_s: Seconds  # raw - exposed


def dispatch_elem_bytes(ctx: Context) -> float:
    """Bytes per element of a dispatched token: 1 B (fp8) in any quantised format - fp8 dispatch (DeepSeek-V3 Sec.
    3.3, DeepEP); the MXFP8 and NVFP4 recipes quantise the expert GEMM inputs after the dispatch and send fp8 at
    the narrowest, never sub-byte copies - and bf16 otherwise. The memory model keeps the same copies
    (memory.layer_activations)."""
    return FP8_BYTES if ctx.elem_bytes < BF16_BYTES else BF16_BYTES


def steady_state_fraction(lay: Layouts, microbatches: Count) -> Ratio:
    """Share of a pipelined schedule's micro-batch slots that have a partner micro-batch: (m - (p-1)) / m."""
    m, pp = microbatches, lay.pp
    return np.where((pp > 1) & (m >= MIN_STEADY_MICROBATCHES), np.clip((m - (pp - 1.0)) / m, 0.0, 1.0), 0.0)


def expert_parallel_comm(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles, groups: GroupComm,
                         tp_comm: TensorParallelComm, moe: MoeFfn, layer: LayerCompute) -> ExpertParallelComm:
    zeros = np.zeros_like(lay.tp)
    f = shape.moe_layer_fraction
    if ctx.moe and ctx.allgather_dispatch:
        exposed = np.where(lay.ep > 1, f * (tp_comm.collectives_count / TP_SIDES) * tp_comm.dispatch_pair_s, 0.0)
        return ExpertParallelComm(dispatch_s=zeros, combine_s=zeros, raw_s=exposed, steady_fraction=zeros,
                                  exposed_s=exposed, hidden_s=zeros)
    if not ctx.moe:
        return ExpertParallelComm(dispatch_s=zeros, combine_s=zeros, raw_s=zeros, steady_fraction=zeros,
                                  exposed_s=zeros, hidden_s=zeros)
    tokens = shape.microbatch_tokens / shape.sequence_shard_ranks * moe.busiest_rank_factor
    disp = groups.moe_alltoall(tokens, ctx.hidden * dispatch_elem_bytes(ctx), ctx.top_k)
    comb = groups.moe_alltoall(tokens, ctx.hidden * BYTES_ACT, ctx.top_k)
    n_pairs = EP_ALLTOALL_PAIRS + recomputed_forwards(ctx, lay) * EP_ALLTOALL_PAIRS_FULL_RECOMPUTE
    raw = f * n_pairs * (disp + comb)
    steady = steady_state_fraction(lay, shape.microbatch_count)
    shared_window = f * SHARED_EXPERT_PASSES * moe.shared_s
    exposed_ss = np.maximum(0.0, raw - layer.total_s)
    exposed_other = np.maximum(0.0, raw - shared_window)
    exposed = np.where(prof.ep_overlap, steady * exposed_ss + (1.0 - steady) * exposed_other, raw)
    return ExpertParallelComm(dispatch_s=disp, combine_s=comb, raw_s=raw, steady_fraction=steady, exposed_s=exposed,
                              hidden_s=raw - exposed)
