"""Ring: every collective NCCL can run as a ring (all-reduce, all-gather, reduce-scatter), hierarchical across
NVLink domains (NVLink hops inside the domain, one NIC hop per domain boundary). Steps (n-1), twice for
all-reduce; bus bandwidth min(NVLink ring bus bandwidth, k x NIC per GPU x routing share); LL, LL128, Simple.
On GPUs whose NVSwitch reduces, the all-reduce ring runs as NVLS (nvls.py) instead."""

from __future__ import annotations

from engine.performance.collectives.bus import Algorithm, Bus, ring_schedule_time
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import Net
from engine.units import Seconds


def ring_time(bus: Bus) -> Seconds:
    return ring_schedule_time(bus, bus.net.nvl_ring)


def ring_applies(net: Net, kind: CollectiveKind) -> bool:
    if kind == CollectiveKind.ALL_REDUCE:
        return not net.nvls
    return kind in (CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER)


RING = Algorithm(name="ring", time=ring_time, applies=ring_applies)
