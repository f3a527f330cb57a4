"""Framework profiles: what each training stack overlaps and how it shards, from its documented defaults.

``training.framework`` picks one profile for the whole run (global per framework, never per validation
row). ``auto`` resolves per layout: layouts with tensor or pipeline parallelism run on Megatron-Core, pure
data-parallel layouts on PyTorch FSDP (NO_SHARD = DDP, SHARD_GRAD_OP = ZeRO-2, FULL_SHARD = ZeRO-3), the
stacks that implement those layouts in practice.

Software as it ran (issue #22): each framework is a list of dated records (``RELEASES``, oldest first, each with
the commit or PR that dates it); ``training.framework_release`` (YYYY-MM) selects the record in force then
(:func:`profile_at`), absent the current one (``PROFILES``). The records say how ZeRO-3 gathers
(``zero3_gather``, buckets), whether DP and p2p communication overlap, which layouts the stack implements
(``interleaved_pipeline`` and what its schedule asserts, ``interleaved_min_pp`` and ``interleaved_microbatch_multiple``;
``max_zero``, ``max_zero_with_pp`` and ``max_zero_with_ep``: refused naming the field, left out of "auto" searches by
the rule table in layout_rules.py), whether its pipeline split can give ranks unequal layer counts
(``uneven_pipeline_split``, terms/pipeline.py) and which NCCL algorithms existed (``nccl_algorithms``, from NCCL's
release dates). docs/performance-model.md s.3b.

Sources (documented defaults):

* Megatron-Core (``DistributedDataParallelConfig``; Megatron-LM README "Distributed optimizer" and the
  GPT-3 175B example script, which turn on ``--overlap-grad-reduce --overlap-param-gather``): the
  distributed optimizer shards optimizer states over DP (ZeRO-1); gradients are kept in a full fp32 buffer
  and reduce-scattered ONCE per step, bucketed (``bucket_size = max(40M, 1M x dp)`` parameters) and
  overlapped with the last micro-batch's backward; parameters all-gathered overlapped with the first
  forward. ``zero: 2`` therefore costs what ZeRO-1 costs in time and memory. Interleaved schedules
  overlap their send/recv (``overlap_p2p_comm``, default on with virtual stages). TP collectives: as the
  source runs them (``tp_backward_overlap``, from 2021-09): each column-parallel linear's backward runs its
  input-gradient all-reduce (with sequence parallelism: reduce-scatter, and the re-gather of its input)
  asynchronously beside its weight- (data-) gradient GEMM; the forward's collectives are exposed
  (terms/tensor_parallel.py; Transformer Engine's userbuffer overlap, ``--tp-comm-overlap``, is off by default).
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
import math
from dataclasses import dataclass

import numpy as np

from engine.schema.enums import Attention, Framework, MoeDispatcher
from engine.units import Arr, BoolArr, Count, Ratio

# ZeRO-3 gather modes: one synchronous collective per parameter tensor (DeepSpeed before PR #1453, 2022-01), or
# parameters batched into buckets gathered asynchronously ahead of use (every stack since).
ZERO3_PER_TENSOR_SYNC = "per-tensor-sync"
ZERO3_BUCKETED_ASYNC = "bucketed-async"
ZERO3_GATHER_MODES = (ZERO3_PER_TENSOR_SYNC, ZERO3_BUCKETED_ASYNC)
# NCCL algorithms gated by NCCL's release (names as collectives/*.py's Algorithm.name), with the NCCL release that
# added each (tag commit dates of github.com/NVIDIA/nccl): NVLS (NVLink SHARP all-reduce, intra-node) in 2.17.1-1
# (5d3ab08b, 2023-03-01; 2.18.1-1, d97a32fa 2023-04-18, added NVLS+Tree and IB SHARP to it across nodes); PAT
# (all-gather / reduce-scatter, one rank per node, log2 steps) in 2.23.4-1 (68b54236, 2024-09-16).
NCCL_NVLS = "nvls"
NCCL_PAT = "pat"
NCCL_RELEASES: tuple[tuple[str, str], ...] = ((NCCL_NVLS, "2023-03"), (NCCL_PAT, "2024-09"))
NCCL_ALL_ALGORITHMS: frozenset[str] = frozenset(name for name, _ in NCCL_RELEASES)


@dataclass(frozen=True, kw_only=True)
class FrameworkProfile:
    """What one training stack overlaps and how it shards (documented defaults; sources in the module doc)."""

    name: str
    # share of the TP collective time left after tp_backward_overlap that is hidden behind GEMMs (userbuffers)
    tp_overlap: float
    grad_overlap: bool  # DP gradient reduction overlapped with backward
    param_overlap: bool  # DP parameter all-gather overlapped with forward
    bucket_params: float  # parameters per DP bucket (the last one is always exposed)
    zero2_per_microbatch: bool  # ZeRO-2 reduces gradients at every micro-batch (DeepSpeed) vs once per step
    zero2_shards_grads: bool  # ZeRO-2 keeps only the owned gradient partition in memory
    zero3_prefetch_layers: float  # layers of parameters gathered ahead (0 = gather on demand)
    pp_overlap: bool  # send/recv of interleaved schedules overlapped with compute
    # each pipeline send and receive a blocking call of its own (DeepSpeed's pipe/p2p.py), so a micro-batch's four
    # transfers (receive the activation, send the gradient back, send the activation on, receive its gradient) run
    # one after another; otherwise they run as two batched send/receive pairs (Megatron's p2p_communication)
    p2p_sequential: bool = False
    # the column-parallel linears' backward overlaps its input-gradient collective with the weight-gradient GEMM (and,
    # with sequence parallelism, the re-gather of its input with the data-gradient GEMM): terms/tensor_parallel.py
    tp_backward_overlap: bool = False
    ep_overlap: bool = False  # MoE all-to-all hidden under another micro-batch's compute (1F1B steady state)
    moe_dispatcher: str = MoeDispatcher.ALLTOALL  # MoE token dispatcher when training.moe_dispatcher is auto
    # ---- software as it ran (issue #22): what the stack did at a date (training.framework_release)
    since: str = "2019-01"  # YYYY-MM from which this record holds (until the next record of the framework)
    zero3_gather: str = ZERO3_BUCKETED_ASYNC  # how ZeRO-3 gathers (ZERO3_GATHER_MODES)
    zero3_gather_bucket_params: float = math.inf  # parameters per ZeRO-3 all-gather (inf: one per layer)
    zero3_reduce_bucket_params: float = math.inf  # parameters per ZeRO-3 reduce-scatter (inf: one per layer)
    max_zero: int = 3  # highest ZeRO stage the stack implements (a higher one is refused, naming training.zero)
    interleaved_pipeline: bool = True  # virtual pipeline stages (parallelism.vpp > 1) implemented
    # what the interleaved schedule asserts (layouts that break it are refused naming parallelism.vpp, left out of
    # "auto" searches): the fewest pipeline stages, and whether micro-batches per step must be a multiple of pp
    interleaved_min_pp: int = 2
    interleaved_microbatch_multiple: bool = False
    max_zero_with_pp: int = 3  # highest ZeRO stage with pipeline stages (pp > 1); a higher one is refused likewise
    max_zero_with_ep: int = 3  # highest ZeRO stage with expert parallelism (ep > 1); likewise
    te_attention: bool = False  # attention runs in Transformer Engine's DotProductAttention (default_attention)
    # the pipeline split may give ranks different numbers of layers (the last one fewer, beside the output layer):
    # terms/pipeline.bottleneck_stage; without it every rank holds L / p layers and the last one the output layer too
    uneven_pipeline_split: bool = True
    # with virtual stages, each model chunk's gradient reduction starts only after that chunk's last backward, at the
    # same virtual micro-batch across the pipeline (Megatron's grad_sync_func): the first stage's first chunk, the last
    # to finish, reduces with no compute left to hide under. Otherwise its buckets start during that last backward
    # (terms/data_parallel.py, first_chunk_exposure)
    grad_sync_after_chunk: bool = False
    # full recomputation checkpoints the multi-token-prediction modules too (each module's projection and layer rerun
    # in the backward: terms/mtp.mtp_reruns); stacks without MTP-specific code wrap them like any other block
    mtp_recompute: bool = True
    nccl_algorithms: frozenset[str] = NCCL_ALL_ALGORITHMS  # NCCL algorithms the stack's NCCL has (set per date)

    @property
    def zero3_per_tensor(self) -> bool:
        """ZeRO-3 issues one synchronous collective per parameter tensor (DeepSpeed before PR #1453)."""
        return self.zero3_gather == ZERO3_PER_TENSOR_SYNC


# Each framework is a list of dated records (``since`` YYYY-MM, oldest first): the record in force at
# training.framework_release is the last one whose ``since`` is not later (the first one for earlier dates), the
# current one when no release is given. Each record is the previous one with what changed, and the commit or PR
# that changed it (docs/performance-model.md s.3b).
#
# Megatron-LM / Megatron-Core (NVIDIA/Megatron-LM history). TP collectives exposed until the asynchronous
# column-parallel backward (2021-09 record below); no userbuffer share (tp_overlap 0: --tp-comm-overlap, e19dcb6ae9
# 2023-10, defaults off); buckets of max(40M, 1M x dp) parameters, 40M
# used; one reduce-scatter per step. Before 2021-02: no virtual stages; DP gradient reduction after the backward;
# no ZeRO (gradients all-reduced, optimizer states replicated) until the distributed optimizer of 2022-06, whose cost
# ZeRO-1/2 then take; no ZeRO-3.
_MEGATRON_2019 = FrameworkProfile(
    name=Framework.MEGATRON_CORE, since="2019-01", tp_overlap=0.0, grad_overlap=False, param_overlap=False,
    bucket_params=40e6, zero2_per_microbatch=False, zero2_shards_grads=False, zero3_prefetch_layers=1.0,
    pp_overlap=False, moe_dispatcher=MoeDispatcher.ALLGATHER, max_zero=0, interleaved_pipeline=False,
    uneven_pipeline_split=False, mtp_recompute=False)
MEGATRON_CORE_PROFILES: tuple[FrameworkProfile, ...] = (
    _MEGATRON_2019,
    # dd88906264 (2021-02-09) "Interleaved pipeline execution and code refactoring" (--virtual-pipeline-...). The
    # schedule needs micro-batches per step divisible by pp: asserted from b7067cbd6f (2021-02-22, "number of
    # microbatches is not divisible by pipeline-parallel size when using interleaved schedule"), a RuntimeError in
    # megatron/core's schedules.py until 4295be1a6c (2024-11), whose microbatch_group_size_per_vp_stage defaults to
    # pp and keeps the rule (m mod group must be 0 or >= pp). pp > 2 with it: 182841f7df (2021-03-20), arguments.py
    _m21 := dataclasses.replace(_MEGATRON_2019, since="2021-02", interleaved_pipeline=True, interleaved_min_pp=3,
                                interleaved_microbatch_multiple=True),
    # 6e1bde1e0f (2021-09-02, merge of 'slym/allreduce_custom'): ColumnParallelLinearWithAsyncAllreduce launches the
    # backward's all-reduce of the input gradient with async_op=True and computes the weight gradient under it (on
    # unless --no-async-tensor-model-parallel-allreduce); the sequence-parallel layers of d898a8991d (2022-05-25,
    # LinearWithGradAccumulationAndAsyncCommunication) re-gather the input under the data-gradient GEMM and
    # reduce-scatter the input gradient under the weight-gradient GEMM the same way
    _m21b := dataclasses.replace(_m21, since="2021-09", tp_backward_overlap=True),
    # d07d29df14 (2022-06-08, merge of 'lmcafee/distrib-opt-nodupe'): --use-distributed-optimizer, the first
    # optimizer-state sharding in Megatron-LM (its parent 55ba1f7b96 has no such argument): ZeRO-1/2 from here
    _m22 := dataclasses.replace(_m21b, since="2022-06", max_zero=2),
    # f9283c5a8a (2023-05-31) "Add option to overlap p2p communication" (on with virtual stages)
    _m23a := dataclasses.replace(_m22, since="2023-05", pp_overlap=True),
    # 2d5220a424 (2023-09-05) "Add --overlap-grad-reduce command-line argument"; with virtual stages from 5d745a79cd
    # (2023-09-25, "Enable grad overlap with interleaved PP schedule"): training.py sets grad_sync_func to each
    # chunk's start_grad_sync under --delay-grad-reduce (default on; --align-grad-reduce from 4e3840535b, 2024-08),
    # and schedules.py calls it after the chunk's last backward, pipeline_parallel_rank virtual micro-batches later;
    # the chunks not yet synchronised (the first chunk on the first stage) at the end of the cool-down
    _m23b := dataclasses.replace(_m23a, since="2023-09", grad_overlap=True, grad_sync_after_chunk=True),
    # f048bf8c08 (2023-11-17) "Overlap all-gather in distributed optimizer" (--overlap-param-gather)
    _m23c := dataclasses.replace(_m23b, since="2023-11", param_overlap=True),
    # e7b74a4b7e (2024-04-02) "Change default `transformer_impl` to `transformer_engine` instead of `local`": attention
    # in Transformer Engine's DotProductAttention (before: the local implementation, FlashAttention-2 with
    # --use-flash-attn)
    _m24a := dataclasses.replace(_m23c, since="2024-04", te_attention=True),
    # 3ee489d9ea (2024-05-31) "Enable virtual pipelining and P2P communication overlap at PP=2" (pp > 1 with
    # overlap_p2p_comm, on by default)
    _m24 := dataclasses.replace(_m24a, since="2024-05", interleaved_min_pp=2),
    # fa8bb5921b (2024-09-05, ADLR/megatron-lm!1881 "Uneven Pipeline Parallelism"): --decoder-first-pipeline-num-layers
    # and --decoder-last-pipeline-num-layers; before it the split asserts num_layers divisible by pp (x vpp) and
    # gives every rank L / p layers, so the last rank also runs the output layer and the loss on top of them
    _m24c := dataclasses.replace(_m24, since="2024-09", uneven_pipeline_split=True),
    # e1993fa6f7 (2024-11-13) "Add support for PyTorch FSDP-2" (ZeRO-3 through fully_shard: one gather per layer).
    # Its arguments.py asserts "--use-torch-fsdp2 is not supported with pipeline parallelism" and "... with expert
    # parallelism" (still so for that flag): ZeRO-3 with pp = 1 and ep = 1 only
    _m24b := dataclasses.replace(_m24c, since="2024-11", max_zero=3, max_zero_with_pp=2, max_zero_with_ep=2),
    # d165a8548b (2025-02-26) "MCore Customized FSDP" (--use-custom-fsdp, later Megatron-FSDP): gathers per layer
    # likewise; its arguments.py asserts only the distributed optimizer, so ZeRO-3 runs beside PP and EP
    _m25 := dataclasses.replace(_m24b, since="2025-02", max_zero_with_pp=3, max_zero_with_ep=3),
    # 08abeedbfe (2025-08-11, ADLR/megatron-lm!3330 "support CP and recompute for MTP"): with full recomputation the
    # MTP block checkpoints each module (projection and layer) under the 'uniform' method; before it (the block of
    # 09ebca716d, 2025-03) it never recomputed them, and its 'block' method still skips them ("block-based recompute
    # is not supported for MTP yet. Skipping recompute.")
    dataclasses.replace(_m25, since="2025-08", mtp_recompute=True),
)
# NeMo: Megatron-Core plus userbuffer TP overlap, 0.6 of TP time hidden (NVIDIA's TP-overlap benchmarks: 50-70%), the
# share taken of every TP pair in place of Megatron's asynchronous-backward path; its transformer layers are
# Transformer Engine's at every date here (NeMo's Megatron models build on TE for fp8).
NEMO_PROFILES = tuple(dataclasses.replace(p, name=Framework.NEMO, tp_overlap=0.6, tp_backward_overlap=False,
                                          moe_dispatcher=MoeDispatcher.ALLTOALL,
                                          te_attention=True)
                      for p in MEGATRON_CORE_PROFILES)
# DeepSpeed (microsoft/DeepSpeed history): overlap_comm false for stages 1-2; reduce_bucket_size 5e8 elements; ZeRO-2
# reduces and shards per micro-batch. Its pipeline engine has one training schedule, 1F1B (TrainSchedule in
# deepspeed/runtime/pipe/schedule.py, no interleaved schedule at any date): vpp > 1 is refused. It runs ZeRO-0/1 only:
# PipelineEngine asserts "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" (fbece50b2, 2021-04-19, PR
# #980, still in deepspeed/runtime/pipe/engine.py in 2025; the assertion made an unsupported combination explicit,
# so every date takes it). Its point-to-point transfers are blocking calls, one tensor at a time
# (deepspeed/runtime/pipe/p2p.py send/recv assert async_op is False, dist.send / dist.recv, at c0eeb69df 2021-10 and
# 38327e07f 2025-02), and TrainSchedule issues RecvActivation, SendGrad on forward steps and SendActivation, RecvGrad
# on backward steps: four serial transfers per micro-batch (p2p_sequential). Its PipelineModule splits by
# partition_method ('parameters' by default, 'uniform', 'type:<regex>') from the pipeline engine's first commit
# (65c2f974d, 2020-09-09, PR #392): stages of unequal layer counts at every date (BLOOM's
# 'type:transformer|embedding' gave the end ranks one layer fewer).
_DEEPSPEED_2020 = FrameworkProfile(
    name=Framework.DEEPSPEED, since="2020-02", tp_overlap=0.0, grad_overlap=False, param_overlap=False,
    bucket_params=5e8, zero2_per_microbatch=True, zero2_shards_grads=True, zero3_prefetch_layers=1.0,
    pp_overlap=False, max_zero=2, interleaved_pipeline=False, zero3_gather=ZERO3_PER_TENSOR_SYNC, max_zero_with_pp=1,
    p2p_sequential=True)
DEEPSPEED_PROFILES: tuple[FrameworkProfile, ...] = (
    _DEEPSPEED_2020,
    # 599258f97 (2021-03-08) "ZeRO 3 Offload (#834)": stage 3, one list-based all_gather per parameter tensor, each
    # followed by torch.cuda.synchronize (PR #1188, c0eeb69df 2021-10-31: "the async version is not async at all,
    # because each all_gather calls torch.cuda.synchronize()"; #1188 kept one collective per tensor)
    _d21 := dataclasses.replace(_DEEPSPEED_2020, since="2021-03", max_zero=3),
    # PR #1453, 4912e0ad7 (2022-01-20, released in v0.6.0): "batching allgather calls to amortize fixed overhead",
    # "batching reduce_scatter calls", "prefetching improvements": gathers in stage3_prefetch_bucket_size (5e7)
    # buckets, reduce-scatters in reduce_bucket_size (5e8) buckets (deepspeed/runtime/zero/config.py defaults)
    dataclasses.replace(_d21, since="2022-01", zero3_gather=ZERO3_BUCKETED_ASYNC, zero3_gather_bucket_params=5e7,
                        zero3_reduce_bucket_params=5e8),
)
# PyTorch FSDP / FSDP2: 25M-parameter buckets (bucket_cap_mb 25), BACKWARD_PRE / implicit one-layer prefetch; ZeRO-3
# gathers one flat parameter per wrapped layer (FSDP2: one all-gather per layer's parameter group). FSDP in
# torch.distributed since PyTorch 1.11 (2022-03); the earliest record stands for earlier dates (FairScale's FSDP).
# The rate limiter (limit_all_gathers: PR #83917, 2022-08; on by default from PR #104900, 2023-07) caps in-flight
# all-gathers at 2 against allocator retries; it changes memory, not this model's one-layer prefetch.
FSDP_PROFILES: tuple[FrameworkProfile, ...] = (FrameworkProfile(
    name=Framework.FSDP, since="2022-03", tp_overlap=0.0, grad_overlap=True, param_overlap=True, bucket_params=25e6,
    zero2_per_microbatch=True, zero2_shards_grads=True, zero3_prefetch_layers=1.0, pp_overlap=False),)
# FSDP2 (fully_shard; PR #118004 stack, 2024-02): same traffic and prefetch, no rate limiter.
FSDP2_PROFILES = (dataclasses.replace(FSDP_PROFILES[-1], name=Framework.FSDP2, since="2024-02"),)

_HISTORY = {p[0].name: p for p in (MEGATRON_CORE_PROFILES, NEMO_PROFILES, DEEPSPEED_PROFILES, FSDP_PROFILES,
                                     FSDP2_PROFILES)}
# keyed on the scenario's framework names (engine.schema.enums.Framework): a name without a profile fails at import
RELEASES: dict[str, tuple[FrameworkProfile, ...]] = {name: _HISTORY[name] for name in Framework.values()}
# the current record of each framework (no training.framework_release)
PROFILES: dict[str, FrameworkProfile] = {name: dated[-1] for name, dated in RELEASES.items()}
MEGATRON_CORE_PROFILE, DEEPSPEED_PROFILE = PROFILES[Framework.MEGATRON_CORE], PROFILES[Framework.DEEPSPEED]


def nccl_algorithms(release: str | None) -> frozenset[str]:
    """The gated NCCL algorithms released by ``release`` (YYYY-MM; None = the current NCCL: all of them)."""
    if release is None:
        return NCCL_ALL_ALGORITHMS
    return frozenset(name for name, since in NCCL_RELEASES if since <= release)


def profile_at(name: str, release: str | None) -> FrameworkProfile:
    """The record of framework ``name`` in force at ``release`` (YYYY-MM; None = the current one), with the NCCL
    algorithms of that date."""
    dated = RELEASES[name]
    if release is None:
        return dated[-1]
    record = next((p for p in reversed(dated) if p.since <= release), dated[0])
    return dataclasses.replace(record, nccl_algorithms=nccl_algorithms(release))


def named_profile(name: str | None, release: str | None = None) -> FrameworkProfile | None:
    """The named profile at ``release`` (None: the current one), or None for ``auto`` (resolved per layout by
    :func:`layout_profiles`)."""
    if name is None or name == "auto":
        return None
    return profile_at(name, release)


# Transformer Engine's DotProductAttention prefers its cuDNN backend (FusedAttention) over FlashAttention "for
# performance reasons" on sm90 from NVIDIA/TransformerEngine 32db39288 (2023-12-07, "Integrate cuDNN frontend v1 to
# fused attention", #497) and on every sm90+ GPU from 544dd14b4 (2025-02-07, TE 2.0: ``>= (9, 0)``). YYYY-MM per GPU
# family; families absent never prefer it (Ampere: FlashAttention is its native class anyway).
TE_NATIVE_ATTENTION_SINCE: dict[str, str] = {"hopper": "2023-12", "blackwell": "2025-02"}


def default_attention(framework: str | None, release: str | None, family: str, family_default: str) -> str:
    """The attention kernel class ``training.attention: auto`` resolves to: "native" where the named stack runs
    Transformer Engine's attention at ``release`` (None = current) and TE prefers cuDNN on the GPU family by then;
    otherwise the family's default (hardware.FAMILY_ATTENTION). The framework ``auto`` takes the family's default:
    its pure data-parallel layouts run on FSDP, whose PyTorch attention is not TE's."""
    prof = named_profile(framework, release)
    since = TE_NATIVE_ATTENTION_SINCE.get(family)
    if prof is not None and prof.te_attention and since is not None and (release is None or release >= since):
        return Attention.NATIVE
    return family_default


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
    tp_backward_overlap: BoolArr
    grad_overlap: BoolArr
    param_overlap: BoolArr
    bucket_params: Count
    zero2_per_microbatch: BoolArr
    zero2_shards_grads: BoolArr
    zero3_prefetch_layers: Count
    pp_overlap: BoolArr
    p2p_sequential: BoolArr
    ep_overlap: BoolArr
    zero3_per_tensor: BoolArr  # one synchronous collective per parameter tensor (FrameworkProfile.zero3_gather)
    zero3_gather_bucket_params: Count
    zero3_reduce_bucket_params: Count
    uneven_pipeline_split: BoolArr
    grad_sync_after_chunk: BoolArr
    mtp_recompute: BoolArr


def runs_on_megatron(tp: Arr, pp: Arr) -> BoolArr:
    """Where ``auto`` runs a layout on Megatron-Core (tensor or pipeline parallelism) rather than on FSDP."""
    return np.asarray((tp > 1) | (pp > 1))


def layout_profiles(framework: str | None, tp: Arr, pp: Arr, release: str | None = None) -> LayoutProfiles:
    """The profile per layout at ``release`` (training.framework_release; None = current): the named framework's
    everywhere, or for ``auto`` Megatron-Core's where the layout has TP or PP and FSDP's elsewhere."""
    names = [f.name for f in dataclasses.fields(LayoutProfiles)]
    fixed = named_profile(framework, release)
    if fixed is not None:
        return LayoutProfiles(**{k: np.full_like(tp, getattr(fixed, k), dtype=type(getattr(fixed, k)))
                                 for k in names})
    mega, fsdp = profile_at(Framework.MEGATRON_CORE, release), profile_at(Framework.FSDP, release)
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
