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
  experts under it elsewhere (model.py).
* MoE token dispatcher (``moe_dispatcher``, used when ``training.moe_dispatcher`` is ``auto``): Megatron-Core's
  ``TransformerConfig.moe_token_dispatcher_type`` defaults to ``allgather`` (2024-2026; arguments.py of commit
  f1f03922, Oct 2024, and transformer_config.py of Aug 2026), so a named Megatron-Core profile gathers tokens
  over TP x EP; NeMo / Megatron-Bridge model configs set ``alltoall``, DeepSpeed-MoE and torchtitan's expert
  parallelism are all-to-all. ``auto`` (no framework named) assumes the all-to-all of tuned MoE recipes.
"""

from __future__ import annotations

from dataclasses import dataclass

FRAMEWORKS = ("megatron-core", "nemo", "deepspeed", "fsdp", "fsdp2")


@dataclass(frozen=True)
class Profile:
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
    moe_dispatcher: str = "alltoall"  # MoE token dispatcher when training.moe_dispatcher is auto


PROFILES: dict[str, Profile] = {
    "megatron-core": Profile("megatron-core", 0.3, True, True, 40e6, False, False, 1.0, True,
                             moe_dispatcher="allgather"),
    "nemo": Profile("nemo", 0.6, True, True, 40e6, False, False, 1.0, True),
    "deepspeed": Profile("deepspeed", 0.0, False, False, 5e8, True, True, 1.0, False),
    "fsdp": Profile("fsdp", 0.0, True, True, 25e6, True, True, 1.0, False),
    "fsdp2": Profile("fsdp2", 0.0, True, True, 25e6, True, True, 1.0, False),
}


def profile(name: str | None) -> Profile | None:
    """The named profile, or None for ``auto`` (resolved per layout by :func:`auto_choice`)."""
    if name is None or name == "auto":
        return None
    return PROFILES[name]


def moe_dispatcher(framework: str | None, choice: str | None) -> str:
    """The MoE token dispatcher a run uses: the one asked for, else the named framework's default, else
    ``alltoall``."""
    if choice is not None:
        return choice
    named = profile(framework)
    return named.moe_dispatcher if named is not None else "alltoall"


def auto_choice(tp: float, pp: float, zero: float) -> str:
    """The stack an ``auto`` layout runs on (scalar form; model.py uses the vectorised equivalent)."""
    return "megatron-core" if tp > 1 or pp > 1 else "fsdp"
