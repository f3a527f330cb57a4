"""One micro-batch as a compute stream and communication streams on shared resources.

Each overlappable collective of a micro-batch (context-parallel all-gathers, expert all-to-all, ZeRO-2
gradient reduce-scatters, ZeRO-3 / FSDP parameter gathers) has its own window: the compute it can run under
(the attention core for CP, the partner micro-batch or the shared experts for EP, the backward for gradient
reduction, the whole micro-batch with a prefetch depth for FSDP). Alone, item ``i`` exposes
``e_i = max(0, c_i - w_i)`` (plus what can never be hidden, e.g. the last FSDP layer). Together they share
hardware: the collectives that leave the NVLink domain all queue on the same NICs, the others on NVLink, and
all of them run their kernels on the SMs the compute also needs (NCCL channels take 12-24% of an H100's SMs),
so together they hide behind at most one micro-batch of compute C. The exposed time is

    E = max( sum_i e_i,  sum_i c_i - C ),

and nothing is hidden twice (the old model let every item hide behind the same compute C). Because every
window is at most C, the step time C + E never grows when C shrinks (faster GPU) or c_i shrink (faster
network): the property tests in tests/engine/performance/test_monotonic.py check it over every layout. The extra above
``sum e_i`` is charged to the items in proportion to the time each can still hide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from engine.performance import hardware as hw
from engine.units import TINY, BoolArr, Seconds


@dataclass(frozen=True)
class TimelineItem:
    """One overlappable collective of a micro-batch."""

    raw_s: Seconds  # c_i: its whole time
    exposed_alone_s: Seconds  # e_i: what it exposes alone, against its own window
    on_nic: BoolArr  # it leaves the NVLink domain (kept for the flow simulator's per-resource view)
    floor_s: Seconds  # f_i <= e_i: what can never be hidden


@dataclass(frozen=True)
class SharedTimeline:
    exposed_s: Mapping[str, Seconds]  # per item, after sharing
    hidden_s: Seconds  # communication run under compute (still slows compute: interference)


def comm_timeline(compute: Seconds, items: Mapping[str, TimelineItem]) -> SharedTimeline:
    """Exposed time per item when the items share the NICs, NVLink and the SMs behind at most ``compute``:
    E = min(sum c_i, max(sum e_i, sum c_i - C + sum f_i)), the extra above sum e_i charged to the items in
    proportion to the time each can still hide."""
    names = list(items)
    raw = {k: np.maximum(items[k].raw_s, 0.0) for k in names}
    alone = {k: np.clip(items[k].exposed_alone_s, 0.0, raw[k]) for k in names}
    zero = np.zeros_like(compute)
    sum_e = sum((alone[k] for k in names), zero)
    sum_c = sum((raw[k] for k in names), zero)
    sum_f = sum((np.minimum(items[k].floor_s, alone[k]) for k in names), zero)
    total = np.minimum(sum_c, np.maximum(sum_e, sum_c - compute + sum_f))
    extra = total - sum_e
    hideable = sum_c - sum_e  # sum of (c_i - e_i) >= extra
    out: dict[str, Seconds] = {}
    for k in names:
        room = raw[k] - alone[k]
        out[k] = alone[k] + np.where(hideable > 0, extra * room / np.maximum(hideable, TINY), 0.0)
    return SharedTimeline(exposed_s=out, hidden_s=sum((raw[k] - out[k] for k in names), zero))


def interference_time(hidden_s: Seconds) -> Seconds:
    """Compute lost to communication run under it: NCCL kernels take SMs and HBM bandwidth
    (hardware.OVERLAP_INTERFERENCE of the hidden time)."""
    return hw.OVERLAP_INTERFERENCE * hidden_s
