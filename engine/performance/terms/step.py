"""One micro-batch on the bottleneck stage and the whole step: what is exposed, what the bubble, stragglers and the
optimizer add, and the breakdown ``predict`` reports. docs/performance-model.md s.3a, s.5.

step = m t_mb + (p-1)/v t_mb + DP exposed + DP interference + TP-duplicated gradients + optimizer + stragglers,
where t_mb is the stage's compute per micro-batch with interference plus its exposed TP, CP, EP, PP and
per-micro-batch ZeRO communication.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.context import Context, Layouts
from engine.performance.terms.context_parallel import ContextParallelComm
from engine.performance.terms.data_parallel import DataParallelSync
from engine.performance.terms.expert_parallel import ExpertParallelComm
from engine.performance.terms.groups import GroupComm, ParallelGroup
from engine.performance.terms.pipeline import BottleneckStage, PipelineComm, pipeline_bubble
from engine.performance.terms.shape import LayoutShape
from engine.performance.terms.sharding import Zero2Traffic, Zero3Traffic
from engine.performance.terms.stragglers import network_straggler_time, straggler_time
from engine.performance.terms.tensor_parallel import TensorParallelComm
from engine.performance.terms.timeline import SharedTimeline, TimelineItem, interference_time
from engine.units import Seconds

# a pipeline transfer waits for its two ranks
PIPELINE_PAIR = 2.0


@dataclass(frozen=True)
class Breakdown:
    """Seconds per step by cause (``Result.breakdown_s``)."""

    compute: Seconds  # with the interference of hidden per-micro-batch communication
    tp_comm: Seconds  # per micro-batch, and the step's all-reduce of TP-duplicated weights' gradients
    cp_comm: Seconds
    ep_comm: Seconds
    pp_comm: Seconds
    pp_bubble: Seconds
    dp_comm_exposed: Seconds  # step-level DP traffic, its interference, and per-micro-batch ZeRO-2/3
    optimizer: Seconds
    stragglers: Seconds  # slowest rank's compute and network jitter (StepTime.stragglers_network_s)


@dataclass(frozen=True)
class MicroBatchTime:
    """One micro-batch on the bottleneck stage, after the shared timeline."""

    compute_s: Seconds
    interference_s: Seconds  # compute lost to hidden TP and timeline communication
    tp_s: Seconds
    cp_s: Seconds
    ep_s: Seconds
    pp_s: Seconds
    zero_s: Seconds  # per-micro-batch ZeRO-2 and ZeRO-3 traffic exposed
    total_s: Seconds


@dataclass(frozen=True)
class StepTime:
    microbatch: MicroBatchTime
    bubble_s: Seconds
    dp_exposed_s: Seconds
    dp_interference_s: Seconds
    tp_grads_s: Seconds  # all-reduce of the TP-duplicated weights' gradients (tensor_parallel.py)
    optimizer_s: Seconds
    stragglers_s: Seconds  # compute and network together
    stragglers_network_s: Seconds  # the network part: exposed collectives waiting for their slowest rank
    step_s: Seconds
    network_s: Seconds  # exposed communication of every kind (the bubble excluded)
    breakdown_s: Breakdown


def timeline_items(ctx: Context, stage: BottleneckStage, window_s: Seconds, cp: ContextParallelComm,
                   ep: ExpertParallelComm, pp: PipelineComm, zero2: Zero2Traffic, zero3: Zero3Traffic,
                   groups: GroupComm) -> dict[str, TimelineItem]:
    """The overlappable collectives of one micro-batch, each with its own window (timeline.py); ``window_s``: the
    micro-batch's compute not already hiding TP's collectives."""
    zeros = np.zeros_like(stage.compute_s)
    on_dp = groups.on_nic(ParallelGroup.DP)
    per_mb = stage.per_microbatch
    return {
        "cp": TimelineItem(raw_s=per_mb(ctx, cp.raw_s), exposed_alone_s=per_mb(ctx, cp.exposed_s),
                           on_nic=groups.on_nic(ParallelGroup.CP), floor_s=per_mb(ctx, cp.floor_s)),
        "ep": TimelineItem(raw_s=per_mb(ctx, ep.exposed_s + ep.hidden_s), exposed_alone_s=per_mb(ctx, ep.exposed_s),
                           on_nic=groups.on_nic(ParallelGroup.EP), floor_s=zeros),
        "z2": TimelineItem(raw_s=zero2.per_microbatch_s, exposed_alone_s=zero2.exposed_s, on_nic=on_dp,
                           floor_s=zero2.floor_s),
        "z3": TimelineItem(raw_s=zero3.per_microbatch_s, exposed_alone_s=zero3.exposed_s, on_nic=on_dp,
                           floor_s=zero3.floor_s),
        "pp": TimelineItem(raw_s=pp.hideable_s, exposed_alone_s=np.maximum(pp.hideable_s - window_s, pp.floor_s),
                           on_nic=pp.on_nic, floor_s=pp.floor_s),
    }


def microbatch_time(ctx: Context, stage: BottleneckStage, tp: TensorParallelComm, pp: PipelineComm,
                    timeline: SharedTimeline) -> MicroBatchTime:
    """The bottleneck stage's micro-batch; TP time the framework hides (``tp.hidden_s``, the tail's
    ``stage.tail_hidden_s``) still interferes."""
    tp_hidden = stage.per_microbatch(ctx, tp.hidden_s) + stage.tail_hidden_s
    interference = interference_time(tp_hidden + timeline.hidden_s)
    exposed = timeline.exposed_s
    tp_s = stage.per_microbatch(ctx, tp.exposed_s) + stage.tail_comm_s  # the layers' and the MTP projections' own
    pp_s = pp.raw_s - pp.hideable_s + exposed["pp"]
    zero_s = exposed["z2"] + exposed["z3"]
    total = stage.compute_s + interference + tp_s + exposed["cp"] + exposed["ep"] + pp_s + zero_s
    return MicroBatchTime(compute_s=stage.compute_s, interference_s=interference, tp_s=tp_s, cp_s=exposed["cp"],
                          ep_s=exposed["ep"], pp_s=pp_s, zero_s=zero_s, total_s=total)


def step_time(ctx: Context, lay: Layouts, shape: LayoutShape, mb: MicroBatchTime, dp: DataParallelSync,
              optimizer_s: Seconds, tp_grads_s: Seconds) -> StepTime:
    """``tp_grads_s``: the step's all-reduce of the TP-duplicated weights' gradients (exposed, after the DP sync)."""
    m = shape.microbatch_count
    bubble = pipeline_bubble(lay, mb.total_s)
    interf_dp = interference_time(np.maximum(dp.hidden_s, 0.0))
    dpc = lay.dp * lay.cp
    strag_net = (m * (network_straggler_time(mb.tp_s, lay.tp) + network_straggler_time(mb.cp_s, lay.cp)
                      + network_straggler_time(mb.ep_s, lay.ep) + network_straggler_time(mb.pp_s, PIPELINE_PAIR)
                      + network_straggler_time(mb.zero_s, dpc))
                 + network_straggler_time(dp.exposed_s + interf_dp, dpc) + network_straggler_time(tp_grads_s, lay.tp))
    # every synchronous step waits for its slowest rank
    strag = straggler_time(m * mb.compute_s, ctx.gpus) + strag_net
    step = m * mb.total_s + bubble + dp.exposed_s + interf_dp + tp_grads_s + optimizer_s + strag
    network = m * (mb.tp_s + mb.cp_s + mb.ep_s + mb.pp_s + mb.zero_s) + dp.exposed_s + interf_dp + tp_grads_s
    breakdown = Breakdown(compute=m * (mb.compute_s + mb.interference_s), tp_comm=m * mb.tp_s + tp_grads_s,
                          cp_comm=m * mb.cp_s, ep_comm=m * mb.ep_s, pp_comm=m * mb.pp_s, pp_bubble=bubble,
                          dp_comm_exposed=dp.exposed_s + interf_dp + m * mb.zero_s, optimizer=optimizer_s,
                          stragglers=strag)
    return StepTime(microbatch=mb, bubble_s=bubble, dp_exposed_s=dp.exposed_s, dp_interference_s=interf_dp,
                    tp_grads_s=np.zeros_like(step) + tp_grads_s, optimizer_s=optimizer_s, stragglers_s=strag,
                    stragglers_network_s=strag_net, step_s=step, network_s=network, breakdown_s=breakdown)
