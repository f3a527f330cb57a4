"""NVLS: all-reduce reduced inside the NVSwitch (Hopper and later), scheduled as the ring's steps.

Inside a domain the bus bandwidth is NVLink x ``nvlink_ar_eff`` (480 GB/s measured on H100, nccl-tests #212 and
#290: 1.07 of the unidirectional line rate) instead of the ring's ``nvlink_ring_eff``; across domains the NIC
schedule is the ring's. It replaces the all-reduce ring where the GPU's all-reduce efficiency exceeds its ring
efficiency (``Net.nvls``: Hopper and later), which it always beats there.
"""

from __future__ import annotations

from engine.performance.collectives.bus import Algorithm, Bus, ring_schedule_time
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import Net
from engine.units import Seconds


def nvls_time(bus: Bus) -> Seconds:
    return ring_schedule_time(bus, bus.net.nvl_ar)


def nvls_applies(net: Net, kind: CollectiveKind) -> bool:
    return kind == CollectiveKind.ALL_REDUCE and net.nvls


NVLS = Algorithm(name="nvls", time=nvls_time, applies=nvls_applies)
