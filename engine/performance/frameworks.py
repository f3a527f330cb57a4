"""Framework profiles: what each training stack overlaps and how it shards, from its documented defaults.

``training.framework`` picks one profile for the whole run (global per framework, never per validation
row). ``auto`` resolves per layout: layouts with tensor or pipeline parallelism run on Megatron-Core, pure
data-parallel layouts on PyTorch FSDP (NO_SHARD = DDP, SHARD_GRAD_OP = ZeRO-2, FULL_SHARD = ZeRO-3), the
stacks that implement those layouts in practice.

Sources (documented defaults):

* Megatron-Core (``DistributedDataParallelConfig``; Megatron-LM README "Distributed optimizer" and the
  GPT-3 175B example script, which turn on ``--overlap-grad-reduce --overlap-param-gather``): the
  distributed optimizer shards optimizer states over DP (ZeRO-1); gradients are kept in a full fp32 buffer
  and reduce-scattered ONCE per step, bucketed (``bucket_size = max(40M, 1M x dp)`` parameters) and
  overlapped with the last micro-batch's backward; parameters all-gathered overlapped with the first
  forward. ``zero: 2`` therefore costs what ZeRO-1 costs in time and memory. Interleaved schedules
  overlap their send/recv (``overlap_p2p_comm``, default on with virtual stages). TP collectives: a 0.3
  share hidden (Transformer Engine's bulk overlap of the sequence-parallel all-gather with the
  dgrad GEMM; calibrated once on the public set, docs/performance-model.md).
* NeMo (NeMo 2.0 LLM recipes, ``MegatronCommOverlapCallback``: ``tp_comm_overlap=True`` with userbuffers on
  Hopper, grad/param overlap on): Megatron-Core plus userbuffer TP overlap, about 0.6 of TP time hidden
  (NVIDIA's TP-overlap benchmarks hide 50-70% on H100).
* DeepSpeed (docs "ZeRO optimizations": ``overlap_comm`` default false for stages 1-2, true for stage 3;
  ``reduce_bucket_size`` 5e8 elements; ``stage3_prefetch_bucket_size`` 5e7; ``stage3_max_live_parameters``
  1e9): ZeRO-2 reduce-scatters gradients at EVERY micro-batch (only the owned partition is accumulated)
  and shards them in memory; without overlap_comm that reduction is exposed. ZeRO-3 gathers per layer with
  prefetch.
* PyTorch FSDP (``FullyShardedDataParallel``: ``backward_prefetch=BACKWARD_PRE``, ``forward_prefetch=False``,
  ``limit_all_gathers=True``; the CPU thread runs ahead issuing the next all-gather): per layer, all-gather
  in forward and backward and reduce-scatter in backward at every micro-batch, one layer prefetched.
  FSDP2 (``fully_shard``): implicit one-layer prefetch in both directions, same traffic.
* MoE all-to-all overlap (``ep_overlap``): Megatron-Core's ``overlap_moe_expert_parallel_comm`` ("overlap EP
  A2A communications with independent computations of different micro-batches in 1f1b phase") and
  ``moe_shared_expert_overlap`` both default to False, so a named Megatron-Core / NeMo profile exposes the
  dispatch and combine; DeepSpeed-MoE and FSDP have no such overlap. ``auto`` assumes the overlap that the
  large MoE training stacks run (DeepSeek-V3's DualPipe, MegaScale-MoE, Megatron-Core with the flag on):
  the all-to-all of one micro-batch under the other's compute in the pipeline steady state, the shared
  experts under it elsewhere (terms/expert_parallel.py).
* MoE token dispatcher (``moe_dispatcher``, used when ``training.moe_dispatcher`` is ``auto``): Megatron-Core's
  ``TransformerConfig.moe_token_dispatcher_type`` defaults to ``allgather`` (2024-2026; arguments.py of commit
  f1f03922, Oct 2024, and transformer_config.py of Aug 2026), so a named Megatron-Core profile gathers tokens
  over TP x EP; NeMo / Megatron-Bridge model configs set ``alltoall``, DeepSpeed-MoE and torchtitan's expert
  parallelism are all-to-all. ``auto`` (no framework named) assumes the all-to-all of tuned MoE recipes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from engine.schema.enums import Framework, MoeDispatcher
from engine.units import Arr, BoolArr, Count, Ratio


@dataclass(frozen=True, kw_only=True)
class FrameworkProfile:
    """What one training stack overlaps and how it shards (documented defaults; sources in the module doc)."""

    name: str
    tp_overlap: float  # share of TP collective time hidden behind GEMMs
    grad_overlap: bool  # DP gradient reduction overlapped with backward
    param_overlap: bool  # DP parameter all-gather overlapped with forward
    bucket_params: float  # parameters per DP bucket (the last one is always exposed)
    zero2_per_microbatch: bool  # ZeRO-2 reduces gradients at every micro-batch (DeepSpeed) vs once per step
    zero2_shards_grads: bool  # ZeRO-2 keeps only the owned gradient partition in memory
    zero3_prefetch_layers: float  # layers of parameters gathered ahead (0 = gather on demand)
    pp_overlap: bool  # send/recv of interleaved schedules overlapped with compute
    ep_overlap: bool = False  # MoE all-to-all hidden under another micro-batch's compute (1F1B steady state)
    moe_dispatcher: str = MoeDispatcher.ALLTOALL  # MoE token dispatcher when training.moe_dispatcher is auto


# Megatron-Core: 0.3 of TP time hidden (Transformer Engine bulk overlap, calibrated once on the public set,
# docs/performance-model.md s.3b); buckets of max(40M, 1M x dp) parameters, 40M used; one reduce-scatter per step.
MEGATRON_CORE_PROFILE = FrameworkProfile(
    name=Framework.MEGATRON_CORE, tp_overlap=0.3, grad_overlap=True, param_overlap=True, bucket_params=40e6,
    zero2_per_microbatch=False, zero2_shards_grads=False, zero3_prefetch_layers=1.0, pp_overlap=True,
    moe_dispatcher=MoeDispatcher.ALLGATHER)
# NeMo: Megatron-Core plus userbuffer TP overlap, 0.6 of TP time hidden (NVIDIA's TP-overlap benchmarks: 50-70%).
NEMO_PROFILE = dataclasses.replace(MEGATRON_CORE_PROFILE, name=Framework.NEMO, tp_overlap=0.6,
                                   moe_dispatcher=MoeDispatcher.ALLTOALL)
# DeepSpeed: overlap_comm false for stages 1-2; reduce_bucket_size 5e8 elements; ZeRO-2 reduces and shards per
# micro-batch.
DEEPSPEED_PROFILE = FrameworkProfile(
    name=Framework.DEEPSPEED, tp_overlap=0.0, grad_overlap=False, param_overlap=False, bucket_params=5e8,
    zero2_per_microbatch=True, zero2_shards_grads=True, zero3_prefetch_layers=1.0, pp_overlap=False)
# PyTorch FSDP / FSDP2: 25M-parameter buckets (bucket_cap_mb 25), BACKWARD_PRE / implicit one-layer prefetch.
FSDP_PROFILE = FrameworkProfile(
    name=Framework.FSDP, tp_overlap=0.0, grad_overlap=True, param_overlap=True, bucket_params=25e6,
    zero2_per_microbatch=True, zero2_shards_grads=True, zero3_prefetch_layers=1.0, pp_overlap=False)
FSDP2_PROFILE = dataclasses.replace(FSDP_PROFILE, name=Framework.FSDP2)

_BY_NAME = {p.name: p for p in (MEGATRON_CORE_PROFILE, NEMO_PROFILE, DEEPSPEED_PROFILE, FSDP_PROFILE, FSDP2_PROFILE)}
# keyed on the scenario's framework names (engine.schema.enums.Framework): a name without a profile fails at import
PROFILES: dict[str, FrameworkProfile] = {name: _BY_NAME[name] for name in Framework.values()}


def named_profile(name: str | None) -> FrameworkProfile | None:
    """The named profile, or None for ``auto`` (resolved per layout by :func:`layout_profiles`)."""
    if name is None or name == "auto":
        return None
    return PROFILES[name]


def moe_dispatcher(framework: str | None, choice: str | None) -> str:
    """The MoE token dispatcher a run uses: the one asked for, else the named framework's default, else
    ``alltoall``."""
    if choice is not None:
        return choice
    named = named_profile(framework)
    return named.moe_dispatcher if named is not None else MoeDispatcher.ALLTOALL


@dataclass(frozen=True)
class LayoutProfiles:
    """The framework profile of every layout (arrays over layouts; fields as :class:`FrameworkProfile`)."""

    tp_overlap: Ratio
    grad_overlap: BoolArr
    param_overlap: BoolArr
    bucket_params: Count
    zero2_per_microbatch: BoolArr
    zero2_shards_grads: BoolArr
    zero3_prefetch_layers: Count
    pp_overlap: BoolArr
    ep_overlap: BoolArr


def runs_on_megatron(tp: Arr, pp: Arr) -> BoolArr:
    """Where ``auto`` runs a layout on Megatron-Core (tensor or pipeline parallelism) rather than on FSDP."""
    return np.asarray((tp > 1) | (pp > 1))


def layout_profiles(framework: str | None, tp: Arr, pp: Arr) -> LayoutProfiles:
    """The profile per layout: the named framework's everywhere, or for ``auto`` Megatron-Core's where the layout
    has TP or PP and FSDP's elsewhere."""
    names = [f.name for f in dataclasses.fields(LayoutProfiles)]
    fixed = named_profile(framework)
    if fixed is not None:
        return LayoutProfiles(**{k: np.full_like(tp, getattr(fixed, k), dtype=type(getattr(fixed, k)))
                                 for k in names})
    mega, fsdp = PROFILES[Framework.MEGATRON_CORE], PROFILES[Framework.FSDP]
    is_mega = runs_on_megatron(tp, pp)
    out = {k: np.where(is_mega, getattr(mega, k), getattr(fsdp, k)) for k in names}
    # ZeRO-2 asked for without naming a framework keeps its gradients sharded in memory; with TP/PP the
    # reduction runs once per step (Megatron-Core's distributed optimizer, Meta's Llama 3 stack: fp32
    # accumulation, one reduce-scatter per step), optimistic by the fp32 gradient buffer such stacks hold
    # (docs/performance-model.md, limitations); pure data parallelism reduces at every micro-batch (FSDP)
    out["zero2_shards_grads"] = np.ones_like(tp, dtype=np.bool_)
    # MoE all-to-all: auto assumes the EP overlap of the large MoE stacks (module doc, ep_overlap)
    out["ep_overlap"] = np.ones_like(tp, dtype=np.bool_)
    return LayoutProfiles(**out)
