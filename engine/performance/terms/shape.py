"""What every term reads of a layout: tokens per micro-batch per GPU, micro-batches per step, the widths a rank
holds, the layers of the bottleneck pipeline stage (docs/performance-model.md, notation)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.attention_widths import KV_TENSORS
from engine.performance.context import RECOMPUTE_FULL, Context, Layouts
from engine.units import Count, Ratio


@dataclass(frozen=True)
class LayoutShape:
    microbatch_tokens: Count  # M = b s / c: tokens of one micro-batch on one GPU
    microbatch_count: Count  # m = B / (d b): micro-batches per step
    sequence_shard_ranks: Count  # t with sequence parallelism, else 1: what divides the non-TP regions
    kv_local_elems: Count  # K (or V) width per TP rank: g d / min(t, g) (MLA: (K + V) / 2 over t)
    grad_reduce_ranks: Count  # d c: the ranks gradients are reduced over
    zero_shard_ranks: Count  # g: the ranks ZeRO shards the model states over (HSDP: training.shard_group; else d c)
    replica_ranks: Count  # d c / g: the shard groups that replicate them (1 without HSDP)
    expert_dp_ranks: Count  # max(d c / e, 1) (folded: t c d / (etp e)): the ranks a routed expert is replicated over
    expert_shard_ranks: Count  # the ranks ZeRO shards routed-expert states over: min(expert_dp_ranks, g)
    moe_layers: float  # layers with a routed-expert FFN
    moe_layer_fraction: float  # of all layers
    stage_layers: Count  # layers on the bottleneck pipeline rank: ceil(L / (p v)) v (see pipeline_chunk_layers)


def layout_shape(ctx: Context, lay: Layouts) -> LayoutShape:
    n_moe = ctx.layers - ctx.dense_layers if ctx.moe else 0.0
    dpc = lay.dp * lay.cp
    shard = hsdp_shard_ranks(ctx, lay)
    edp = expert_dp_ranks(lay)
    return LayoutShape(
        microbatch_tokens=lay.mb * ctx.seq / lay.cp,
        microbatch_count=ctx.global_batch / (lay.dp * lay.mb),
        sequence_shard_ranks=np.where(lay.sp, lay.tp, 1.0),
        kv_local_elems=ctx.attn.k_v / KV_TENSORS / np.minimum(lay.tp, ctx.attn.kv_split_heads),
        grad_reduce_ranks=dpc,
        zero_shard_ranks=shard,
        replica_ranks=dpc / shard,
        expert_dp_ranks=edp,
        expert_shard_ranks=expert_shard_ranks(lay, edp, dpc, shard),
        moe_layers=n_moe,
        moe_layer_fraction=n_moe / ctx.layers,
        stage_layers=stage_layers(ctx, lay),
    )


def pipeline_chunk_layers(ctx: Context, lay: Layouts) -> Count:
    """Places of one virtual stage (model chunk) in the pipeline split: ceil(L / (p v)), or ceil((L + 2) / (p v))
    when the embedding and the loss each take one (``parallelism.embedding_loss_in_split``; Megatron-Core's
    account_for_embedding/loss_in_pipeline_split, Llama 3 section 3.3.2) and there is a pipeline."""
    places = np.where(lay.pp > 1, ctx.pipeline_places, ctx.layers)
    return np.ceil(places / (lay.pp * lay.vpp))


def edges_in_split(ctx: Context) -> bool:
    """Whether the embedding and the loss take places of their own in the pipeline split (more places than
    layers; ``parallelism.embedding_loss_in_split``)."""
    return ctx.pipeline_places > ctx.layers


def stage_layers(ctx: Context, lay: Layouts) -> Count:
    """Transformer layers on the bottleneck pipeline rank: v chunks of ceil(L / (p v)). With the embedding and
    the loss in the split, a middle rank (p >= 3) holds v full chunks; at p = 2 both ranks give one place to the
    embedding or the loss."""
    full = pipeline_chunk_layers(ctx, lay) * lay.vpp
    return np.asarray(np.where(lay.pp == 2, edge_stage_layers(ctx, lay), full), dtype=np.float64)


def edge_stage_layers(ctx: Context, lay: Layouts) -> Count:
    """Transformer layers on the first or the last pipeline rank: v chunks of ceil(L / (p v)), less the place the
    embedding (first rank) or the output layer and loss (last rank) take when they are in the split."""
    full = pipeline_chunk_layers(ctx, lay) * lay.vpp
    return np.asarray(full - edges_in_split(ctx) * (lay.pp > 1), dtype=np.float64)


def expert_dp_ranks(lay: Layouts) -> Count:
    """Ranks one routed expert's weights are replicated over (the expert-data-parallel group, edp) [ranks]: d c / e
    (EP drawn from the d c ranks); with MoE parallel folding (Megatron-Core expert grid etp x ep x edp x pp over the
    attention's t c d ranks of a stage, arXiv 2504.14960) t c d / (etp e)."""
    unfolded = np.maximum(lay.dp * lay.cp / lay.ep, 1.0)
    if not np.any(lay.folded):
        return unfolded
    return np.where(lay.folded, np.maximum(lay.tp * lay.cp * lay.dp / (lay.expert_tp * lay.ep), 1.0), unfolded)


def expert_shard_ranks(lay: Layouts, edp: Count, dpc: Count, shard: Count) -> Count:
    """Ranks ZeRO shards the routed-expert states over [ranks]: the expert-data-parallel group, capped by the
    shard group (HSDP). Folded, the expert-DP group can exceed d c (dp 1, t 8, etp 1, ep 2: edp 4), and the
    distributed optimizer shards the experts over all of it unless HSDP caps the shard group below d c."""
    unfolded = np.minimum(edp, shard)
    if not np.any(lay.folded):
        return unfolded
    return np.where(lay.folded, np.where(shard < dpc, np.minimum(edp, shard), edp), unfolded)


def hsdp_shard_ranks(ctx: Context, lay: Layouts) -> Count:
    """The ZeRO shard group of each layout: training.shard_group where it is a multiple of the layout's CP degree
    that divides its d c ranks (the search keeps only such layouts, api.candidate_layouts), else every d c rank."""
    dpc = lay.dp * lay.cp
    g = ctx.shard_group
    if g <= 0:
        return np.asarray(dpc, dtype=np.float64)
    fits = (np.mod(dpc, g) == 0) & (np.mod(g, lay.cp) == 0)
    return np.where(fits, np.minimum(g, dpc), dpc)


def dense_fraction(shape: LayoutShape) -> float:
    """Share of layers with a dense FFN (1 - the MoE share)."""
    return 1.0 - shape.moe_layer_fraction


def mix(shape: LayoutShape, dense: Count | float, moe: Count | float) -> Ratio:
    """A per-layer quantity averaged over the model's dense and MoE layers."""
    return np.asarray(dense_fraction(shape) * dense + shape.moe_layer_fraction * moe)


def recomputed_forwards(ctx: Context, lay: Layouts) -> Count:
    """Forward passes per layer and micro-batch that full recomputation adds, averaged over a chunk's layers [count]:
    :func:`full_recompute_share` where training.recompute is full (all layers: 1), 0 otherwise. Each brings its
    layer's forward collectives (TP pairs, the MoE dispatch and combine, the CP exchange) again."""
    return np.where(lay.recompute >= RECOMPUTE_FULL, full_recompute_share(ctx, lay), 0.0)


def full_recompute_share(ctx: Context, lay: Layouts) -> Count:
    """Share of a pipeline chunk's layers that full recomputation checkpoints [1]: all of them, or with
    training.recompute_layers = n (Megatron-Core's block method, per virtual stage) min(n, c) / c of a chunk of
    c = ceil(L / (p v)) layers; the others keep every activation."""
    if not ctx.recompute_layers:
        return np.ones_like(lay.tp)
    chunk = pipeline_chunk_layers(ctx, lay)
    return np.minimum(ctx.recompute_layers, chunk) / chunk

