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
network): the property tests in tests/engine/test_monotonic.py check it over every layout. The extra above
``sum e_i`` is charged to the items in proportion to the time each can still hide.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]


def comm_timeline(compute: Arr, items: dict[str, tuple[Arr, Arr, Arr, Arr]]) -> dict[str, Arr]:
    """``items``: name -> (raw time c_i, exposed alone e_i, 1.0 where it uses the NICs else 0.0 (kept for the
    flow simulator's per-resource view), never-hidden part f_i <= e_i), per micro-batch.

    Returns exposed time per item after sharing, and ``hidden`` (total communication time run under compute,
    which still slows compute through SM and HBM interference).
    """
    names = list(items)
    raw = {k: np.maximum(items[k][0], 0.0) for k in names}
    alone = {k: np.clip(items[k][1], 0.0, raw[k]) for k in names}
    zero = np.zeros_like(compute)
    sum_e = sum((alone[k] for k in names), zero)
    sum_c = sum((raw[k] for k in names), zero)
    sum_f = sum((np.minimum(items[k][3], alone[k]) for k in names), zero)
    total = np.minimum(sum_c, np.maximum(sum_e, sum_c - compute + sum_f))
    extra = total - sum_e
    hideable = sum_c - sum_e  # sum of (c_i - e_i) >= extra
    out: dict[str, Arr] = {}
    for k in names:
        room = raw[k] - alone[k]
        out[k] = alone[k] + np.where(hideable > 0, extra * room / np.maximum(hideable, 1e-30), 0.0)
    out["hidden"] = sum((raw[k] - out[k] for k in names), zero)
    return out
