"""Multi-token prediction (model.mtp_layers): D sequential modules after the main model, on the last pipeline rank.

Module k (DeepSeek-V3, arXiv 2412.19437 Sec. 2.2) normalises the previous depth's hidden state and the embedding of
token i + k, concatenates them (2h), projects them back to h (M_k, 2h x h), runs one transformer layer and the
shared output head and cross-entropy on the result. Megatron-Core (``--mtp-num-layers``, 09ebca716d, 2025-03-22;
megatron/core/transformer/multi_token_prediction.py) builds the layer from the decoder's last-layer spec (an MoE
layer in an MoE model), puts every module on the last pipeline stage ("we only support put all of MTP layers on the
last pipeline stage") and keeps there a copy of the word embedding tied to the first stage's. Per micro-batch the
last rank therefore runs, beside its layers and the output layer, D x (projection + one layer + the output layer
and loss again), and holds the modules' weights, the embedding copy and the modules' activations and logits.
docs/performance-model.md s.2, s.6.

The projection's TP collectives (:func:`projection_tp_comm`, Megatron-Core's _concat_embeddings): eh_proj is a
column-parallel linear whose output is all-gathered over the hidden dimension and, with sequence parallelism,
scattered back to sequence shards; with sequence parallelism it all-gathers its 2h input too. Full recomputation
reruns each module's forward (projection, its collectives and the layer) where the stack checkpoints the modules
(:func:`mtp_reruns`). The module layer's weights held whole on every TP rank (its router, MLA down-projections) join
the step's all-reduce of such gradients (terms/parameters.tp_duplicated_params). Not modelled: ZeRO-3 gathers of the
modules' weights, and, where a module is not recomputed, its layer's share of the recomputed forward's collectives
(its per-layer communication is a mean layer's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.context import RECOMPUTE_FULL, Context, Layouts
from engine.performance.datatypes import BYTES_ACT
from engine.performance.frameworks import LayoutProfiles
from engine.performance.terms.flops import MTP_PROJECTION_INPUTS_PER_H, flops_per_token, mtp_layer_flops
from engine.performance.terms.groups import GroupComm, ParallelGroup
from engine.performance.terms.kernels import BWD_GEMM_FACTOR, gemm_time
from engine.performance.terms.shape import LayoutShape
from engine.units import Arr, Bytes, Count, Seconds

# Kept for the backward per token and module: the two RMSNorm inputs (the hidden state and the embedding, h each)
# and their normed concatenation (2h, the projection's input), in bf16: 4h elements.
MTP_SAVED_ELEMS_PER_H = 4.0


@dataclass(frozen=True)
class MtpCompute:
    """The D modules' work per micro-batch on the last pipeline rank."""

    projection_s: Seconds  # one module's 2h -> h projection, forward and backward (and its recomputed forward)
    equivalent_layers: float  # D x one module's layer FLOPs / the model's mean layer FLOPs
    compute_s: Seconds  # D x (projection + output layer and loss) + the layers' compute (their communication: the
    # bottleneck stage counts equivalent_layers more layers of it on the last rank, terms/pipeline.py)
    reruns_count: Arr  # 1 where full recomputation reruns the modules' forward (mtp_reruns; 0 without modules)
    tp_exposed_s: Seconds  # D x the projection's TP collectives left exposed (projection_tp_comm)
    tp_hidden_s: Seconds  # D x those the stack hides (under the projection's backward GEMMs, userbuffers)


def mtp_equivalent_layers(ctx: Context) -> float:
    """The D modules' transformer layers in mean layers of the model: D x their FLOPs / (the L layers' FLOPs / L).
    A dense model's module layer is one mean layer; an MoE model's is an MoE layer (heavier or lighter than the mean
    when the model has dense layers)."""
    if not ctx.mtp_layers:
        return 0.0
    mean = flops_per_token(ctx).layers_flops / ctx.layers
    return ctx.mtp_layers * mtp_layer_flops(ctx) / mean


def mtp_reruns(ctx: Context, lay: Layouts, prof: LayoutProfiles) -> Arr:
    """1.0 where full recomputation reruns each module's forward in the backward (its projection with its forward
    collectives, and its layer), 0.0 elsewhere: training.recompute full over every layer, on a stack that checkpoints
    the modules (``prof.mtp_recompute``: Megatron-Core from 2025-08, its 'uniform' method). A partial recomputation
    (training.recompute_layers, Megatron-Core's 'block' method) skips them, as Megatron-Core does."""
    full = (lay.recompute >= RECOMPUTE_FULL) & prof.mtp_recompute
    return np.where(full & (not ctx.recompute_layers), 1.0, 0.0)


def mtp_compute(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles, groups: GroupComm,
                layer_total_s: Seconds, layer_recompute_s: Seconds, logits_total_s: Seconds) -> MtpCompute:
    """Time per micro-batch of the modules on the last rank: D projections (M x 2h) @ (2h x h/t) forward and backward
    (and forward again where :func:`mtp_reruns`), D more passes of the output layer and loss (``logits_total_s``), and
    the modules' layers as :func:`mtp_equivalent_layers` mean layers of ``layer_total_s`` compute each, less the
    layers' recomputed forward ``layer_recompute_s`` where the modules are not rerun; beside it the projections' TP
    collectives (:func:`projection_tp_comm`)."""
    d = float(ctx.mtp_layers)
    if not d:  # no modules: nothing to time (the common case, kept off the search's hot path)
        zero = np.zeros_like(layer_total_s)
        return MtpCompute(projection_s=zero, equivalent_layers=0.0, compute_s=zero, reruns_count=zero,
                          tp_exposed_s=zero, tp_hidden_s=zero)
    h = ctx.hidden
    rerun = mtp_reruns(ctx, lay, prof)
    gemm = gemm_time(ctx, shape.microbatch_tokens, MTP_PROJECTION_INPUTS_PER_H * h * np.ones_like(lay.tp), h / lay.tp)
    proj = (1.0 + BWD_GEMM_FACTOR + rerun) * gemm
    eq = mtp_equivalent_layers(ctx)
    layer_s = layer_total_s - (1.0 - rerun) * layer_recompute_s
    exposed, hidden = projection_tp_comm(ctx, lay, shape, prof, groups, gemm, rerun)
    return MtpCompute(projection_s=proj, equivalent_layers=eq, compute_s=d * (proj + logits_total_s) + eq * layer_s,
                      reruns_count=rerun, tp_exposed_s=d * exposed, tp_hidden_s=d * hidden)


def projection_tp_comm(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles, groups: GroupComm,
                       gemm_s: Seconds, rerun: Arr | float = 0.0) -> tuple[Seconds, Seconds]:
    """One module's projection TP collectives per micro-batch, (exposed, hidden) [s], as Megatron-Core's
    _concat_embeddings runs them over the t ranks of the TP group (M tokens of the micro-batch, bf16; none at t 1):

    * its own calls (NCCL outside the linear layer, never hidden): forward the all-gather of the h/t-wide output
      over the hidden dimension (gather_from_tensor_model_parallel_region, an M x h buffer); with sequence
      parallelism, backward the all-gather of the output gradient (the backward of the scatter to sequence shards);
    * eh_proj, a column-parallel linear: with sequence parallelism forward the all-gather of its M x 2h input and
      backward the reduce-scatter of the input gradient, and with Megatron's asynchronous backward
      (``tp_backward_overlap``) the input gathered again for the weight gradient; without it backward the
      all-reduce of the M x 2h input gradient. As the layer's linears (terms/tensor_parallel.py): the asynchronous
      backward runs the input-gradient collective beside the weight-gradient GEMM and the re-gather beside the
      data-gradient GEMM, each hidden for at most its GEMM's time ``gemm_s`` (each backward GEMM does the
      forward's FLOPs); the stack's ``tp_overlap`` share of the rest is hidden (Transformer Engine userbuffers).

    A recomputed forward (``rerun`` 1: :func:`mtp_reruns`) runs both forward all-gathers again."""
    act = shape.microbatch_tokens * ctx.hidden * BYTES_ACT
    wide = MTP_PROJECTION_INPUTS_PER_H * act  # the M x 2h input
    gather_h = groups.time(CollectiveKind.ALL_GATHER, act, ParallelGroup.TP)
    gather_2h = groups.time(CollectiveKind.ALL_GATHER, wide, ParallelGroup.TP)
    sp = np.asarray(lay.sp, dtype=bool)
    forwards = 1.0 + np.asarray(rerun, dtype=np.float64)
    plain = forwards * gather_h + np.where(sp, gather_h, 0.0)
    linear_fwd = forwards * np.where(sp, gather_2h, 0.0)
    linear_bwd = np.where(sp, groups.time(CollectiveKind.REDUCE_SCATTER, wide, ParallelGroup.TP),
                          groups.time(CollectiveKind.ALL_REDUCE, wide, ParallelGroup.TP))
    backward = prof.tp_backward_overlap  # at t 1 everything is masked below
    regather = np.where(backward & sp, gather_2h, 0.0)
    under = np.where(backward, np.minimum(linear_bwd, gemm_s) + np.minimum(regather, gemm_s), 0.0)
    left = linear_fwd + linear_bwd + regather - under
    on = lay.tp > 1
    exposed = np.where(on, plain + left * (1.0 - prof.tp_overlap), 0.0)
    hidden = np.where(on, under + left * prof.tp_overlap, 0.0)
    return exposed, hidden


@dataclass(frozen=True)
class MtpParams:
    """Weights the D modules add to the last pipeline rank, per GPU."""

    total: Count  # layers, projections and (with a pipeline) the embedding copy
    expert: Count  # of which routed-expert weights (sharded over the expert-data-parallel ranks)


def mtp_params(ctx: Context, lay: Layouts, attention_gpu: Count, moe_layer_gpu: Count, dense_ffn_gpu: Count,
               routed_expert_gpu: Count) -> MtpParams:
    """Per GPU: D x (the last layer kind's weights + the 2h x h/t projection), and with a pipeline the word
    embedding's copy V h / t (without one the stage already holds the embedding)."""
    d = float(ctx.mtp_layers)
    if not d:
        zero = np.zeros_like(lay.tp, dtype=np.float64)
        return MtpParams(total=zero, expert=zero)
    layer = attention_gpu + (moe_layer_gpu if ctx.moe else dense_ffn_gpu)
    proj = MTP_PROJECTION_INPUTS_PER_H * ctx.hidden ** 2 / lay.tp
    embedding_copy = np.where(lay.pp > 1, ctx.vocab * ctx.hidden / lay.tp, 0.0)
    experts = d * routed_expert_gpu if ctx.moe else 0.0
    return MtpParams(total=np.asarray(d * (layer + proj) + embedding_copy, dtype=np.float64),
                     expert=np.asarray(experts + 0.0 * lay.tp, dtype=np.float64))


def mtp_activation_bytes(ctx: Context, lay: Layouts, shape: LayoutShape, layer_kept_bytes: Arr,
                         logits_bytes: Bytes) -> Bytes:
    """Bytes per GPU the modules hold for one micro-batch on the last rank (1F1B keeps one in flight there; the
    modules run at the end of the last chunk): D x (a mean layer's kept activations + the normed inputs, M 4h 2 B
    over the sequence-parallel ranks, + one more set of logits)."""
    d = float(ctx.mtp_layers)
    if not d:
        return np.zeros_like(lay.tp, dtype=np.float64)
    inputs = BYTES_ACT * MTP_SAVED_ELEMS_PER_H * ctx.hidden / shape.sequence_shard_ranks
    return d * (shape.microbatch_tokens * (layer_kept_bytes + inputs) + logits_bytes) + 0.0 * lay.tp
