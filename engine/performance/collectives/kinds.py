"""The collectives the model times, by the short names stored calibration profiles use as keys."""

from __future__ import annotations

from enum import StrEnum


class CollectiveKind(StrEnum):
    """A collective operation. The values are the keys of ``Context.net_bw_scale`` and of the per-kind
    bandwidth scales of stored calibration profiles ("ar", "ag", "rs", "a2a", "p2p"), so profiles keep reading."""

    ALL_REDUCE = "ar"
    ALL_GATHER = "ag"
    REDUCE_SCATTER = "rs"
    ALL_TO_ALL = "a2a"
    P2P = "p2p"  # pipeline send/recv


# Bus volume per rank relative to the ring's (n-1)/n of the buffer: an all-reduce is a reduce-scatter
# followed by an all-gather, so it moves the buffer twice (2(n-1)/n) and takes twice the ring steps.
ALL_REDUCE_PHASES = 2.0
