"""The training performance model, written once as vectorised numpy over arrays of layouts.

:func:`step_terms` evaluates every named term (terms/, one module per concept) for every layout at once and keeps
them; :func:`evaluate` reduces them to what ``predict`` and ``search`` rank: step time, FLOPs, memory, whether the
layout fits, and the breakdown. ``predict`` calls it with arrays of length 1 and the search with every candidate,
so the two can never disagree; ``explain`` serialises the terms of one layout. Equations and the source of every
constant: docs/performance-model.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from engine.performance.context import Context, Layouts
from engine.performance.frameworks import LayoutProfiles, layout_profiles
from engine.performance.terms.attention import AttentionCore, attention_core
from engine.performance.terms.context_parallel import ContextParallelComm, context_parallel_comm
from engine.performance.terms.data_parallel import FORWARD_COMM_SHARE, DataParallelSync, data_parallel_sync
from engine.performance.terms.expert_parallel import ExpertParallelComm, expert_parallel_comm
from engine.performance.terms.ffn import DenseFfn, MoeFfn, dense_ffn, moe_ffn
from engine.performance.terms.flops import StepFlops, step_flops
from engine.performance.terms.groups import fabric_groups
from engine.performance.terms.layer import (
    LayerCompute,
    LogitsCompute,
    layer_compute,
    logits_compute,
    tp_linear_backward_gemms,
)
from engine.performance.terms.memory import MemoryPerGpu, memory_per_gpu, usable_memory_bytes
from engine.performance.terms.mtp import MtpCompute, mtp_compute
from engine.performance.terms.optimizer import OptimizerStep, optimizer_step
from engine.performance.terms.parameters import GpuParams, gpu_params
from engine.performance.terms.pipeline import BottleneckStage, PipelineComm, bottleneck_stage, pipeline_comm
from engine.performance.terms.shape import LayoutShape, full_recompute_share, layout_shape
from engine.performance.terms.sharding import (
    Zero2Traffic,
    Zero3Traffic,
    parameter_tensors,
    zero2_traffic,
    zero3_traffic,
)
from engine.performance.terms.step import Breakdown, StepTime, microbatch_time, step_time, timeline_items
from engine.performance.terms.tensor_parallel import (
    TensorParallelComm,
    duplicated_grad_allreduce,
    tensor_parallel_comm,
)
from engine.performance.terms.timeline import SharedTimeline, comm_timeline
from engine.units import Arr, BoolArr, Bytes, Flops, Ratio, Seconds

# the causes of ``Result.breakdown_s``, in order
BREAKDOWN_KEYS = tuple(f.name for f in fields(Breakdown))


@dataclass(frozen=True)
class StepTerms:
    """Every named term of the step model, for an array of layouts (one record per concept)."""

    shape: LayoutShape
    framework: LayoutProfiles
    attention: AttentionCore
    dense_ffn: DenseFfn
    moe_ffn: MoeFfn
    layer: LayerCompute
    logits: LogitsCompute
    mtp: MtpCompute
    tensor_parallel: TensorParallelComm
    context_parallel: ContextParallelComm
    expert_parallel: ExpertParallelComm
    stage: BottleneckStage
    pipeline: PipelineComm
    params: GpuParams
    data_parallel: DataParallelSync
    zero2: Zero2Traffic
    zero3: Zero3Traffic
    timeline: SharedTimeline
    optimizer: OptimizerStep
    step: StepTime
    memory: MemoryPerGpu
    flops: StepFlops


@dataclass(frozen=True)
class LayoutEvaluation:
    """What ``predict`` and ``search`` rank, per layout."""

    step_time_s: Seconds
    tokens_per_s: Arr
    model_flops: Flops
    hardware_flops: Flops
    memory_bytes: Bytes
    fits: BoolArr
    network_wait_fraction: Ratio
    breakdown_s: Breakdown


def step_terms(ctx: Context, lay: Layouts) -> StepTerms:
    """Every term for every layout: per layer, per micro-batch on the bottleneck stage, per step."""
    shape = layout_shape(ctx, lay)
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, ctx.framework_release)
    groups = fabric_groups(ctx, lay)
    # compute of one layer and of the output layer, one micro-batch, one GPU
    attn = attention_core(ctx, lay, shape)
    dense, moe = dense_ffn(ctx, lay, shape), moe_ffn(ctx, lay, shape)
    layer = layer_compute(ctx, lay, shape, attn, dense, moe)
    logits = logits_compute(ctx, lay, shape)
    # per-layer communication
    tp = tensor_parallel_comm(ctx, lay, shape, prof, groups,
                              backward_gemm_s=tp_linear_backward_gemms(layer, dense, moe, shape))
    cp = context_parallel_comm(ctx, lay, shape, attn, groups)
    ep = expert_parallel_comm(ctx, lay, shape, prof, groups, tp, moe, layer)
    comm_layer = tp.exposed_s + cp.exposed_s + ep.exposed_s
    mtp = mtp_compute(ctx, lay, shape, prof, groups, layer.total_s, layer.recompute_s, logits.total_s)
    stage = bottleneck_stage(ctx, lay, shape, layer.total_s, comm_layer, logits.total_s + mtp.compute_s,
                             mtp.equivalent_layers, prof.uneven_pipeline_split, mtp.tp_exposed_s, mtp.tp_hidden_s)
    pp = pipeline_comm(ctx, lay, shape, prof, groups)
    # data parallelism and ZeRO
    params = gpu_params(ctx, lay, shape)
    # The backward GEMMs that Megatron's asynchronous TP collectives run beside are their window: not a window again
    # for the other traffic (the shared timeline's rule: what is overlapped shares the SMs and links behind at most
    # the compute). The windows DP traffic runs under: each pass's compute (the backward's less those GEMMs) and the
    # per-layer communication exposed in it (TP's as its term splits it, CP's and EP's half each way).
    other_comm = FORWARD_COMM_SHARE * (cp.exposed_s + ep.exposed_s)
    bwd_free = np.maximum(layer.backward_s + layer.recompute_s - tp.under_backward_gemms_s, 0.0)
    fwd_window = stage.per_microbatch(ctx, layer.forward_s + (tp.exposed_s - tp.backward_exposed_s) + other_comm)
    bwd_window = stage.per_microbatch(ctx, bwd_free + tp.backward_exposed_s + other_comm)
    window = np.maximum(stage.compute_s - stage.per_microbatch(ctx, tp.under_backward_gemms_s), 0.0)
    dp = data_parallel_sync(lay, shape, prof, groups, params.total_params, fwd_window, bwd_window,
                            step_compute_s=shape.microbatch_count * window,
                            expert_params=params.expert_params)
    zero2 = zero2_traffic(prof, dp.grad_reduction_s, dp.reduces_per_microbatch, dp.bucket_fraction,
                          stage.per_microbatch(ctx, bwd_free))
    zero3 = zero3_traffic(lay, shape, prof, groups, params.layer_params, params.vocab_params, window,
                          parameter_tensors(ctx, lay))
    # one micro-batch on the shared timeline, then the step
    timeline = comm_timeline(window, timeline_items(ctx, stage, window, cp, ep, pp, zero2, zero3, groups))
    mb = microbatch_time(ctx, stage, tp, pp, timeline)
    opt = optimizer_step(ctx, lay, shape, params)
    tp_grads = duplicated_grad_allreduce(lay, groups, params.tp_duplicated_params, dp.grad_elem_bytes)
    step = step_time(ctx, lay, shape, mb, dp, opt.time_s, tp_grads)
    memory = memory_per_gpu(ctx, lay, shape, prof, params)
    flops = step_flops(ctx, lay.recompute, attn.unfused, full_recompute_share(ctx, lay), mtp.reruns_count)
    return StepTerms(shape=shape, framework=prof, attention=attn, dense_ffn=dense, moe_ffn=moe, layer=layer,
                     logits=logits, mtp=mtp, tensor_parallel=tp, context_parallel=cp, expert_parallel=ep, stage=stage,
                     pipeline=pp, params=params, data_parallel=dp, zero2=zero2, zero3=zero3, timeline=timeline,
                     optimizer=opt, step=step, memory=memory, flops=flops)


def summarise(ctx: Context, terms: StepTerms) -> LayoutEvaluation:
    step = terms.step.step_s
    mem = terms.memory.total_bytes
    return LayoutEvaluation(step_time_s=step, tokens_per_s=ctx.global_batch * ctx.seq / step,
                            model_flops=terms.flops.model_flops, hardware_flops=terms.flops.hardware_flops,
                            memory_bytes=mem, fits=np.asarray(mem <= usable_memory_bytes(ctx.gpu)),
                            network_wait_fraction=terms.step.network_s / step, breakdown_s=terms.step.breakdown_s)


def evaluate(ctx: Context, lay: Layouts) -> LayoutEvaluation:
    """Step time, FLOPs, memory and breakdown for every layout (all arrays of len(lay))."""
    return summarise(ctx, step_terms(ctx, lay))


def concat_evaluations(parts: Sequence[LayoutEvaluation]) -> LayoutEvaluation:
    """The evaluations of consecutive chunks of layouts as one."""
    def cat(records: Sequence[LayoutEvaluation | Breakdown], cls: type) -> dict[str, Any]:
        return {f.name: np.concatenate([getattr(r, f.name) for r in records]) for f in fields(cls)
                if f.name != "breakdown_s"}

    breakdown = Breakdown(**cat([p.breakdown_s for p in parts], Breakdown))
    return LayoutEvaluation(**cat(parts, LayoutEvaluation), breakdown_s=breakdown)


def divisors(n: int) -> list[int]:
    out = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(out + [n // d for d in out]))
