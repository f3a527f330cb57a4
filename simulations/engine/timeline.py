"""One micro-batch as a compute stream and communication streams on shared resources.

Each overlappable collective of a micro-batch (context-parallel all-gathers, expert all-to-all, ZeRO-2
gradient reduce-scatters, ZeRO-3 / FSDP parameter gathers) has its own window: the compute it can run under
(the attention core for CP, the partner micro-batch or the shared experts for EP, the backward for gradient
reduction, the whole micro-batch with a prefetch depth for FSDP). Alone, item ``i`` exposes
``e_i = max(0, c_i - w_i)`` (plus what can never be hidden, e.g. the last FSDP layer). Together they share
hardware: the collectives that leave the NVLink domain all queue on the same NICs, the others on NVLink,
and each stream can hide at most one micro-batch of compute. So the exposed time is

    E = max( sum_i e_i,  sum_{i on NIC} c_i - C,  sum_{i on NVLink} c_i - C ),

and nothing is hidden twice (the old model let every item hide behind the same compute C). The extra above
``sum e_i`` is charged to the items of the binding stream in proportion to their time.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]


def comm_timeline(compute: Arr, items: dict[str, tuple[Arr, Arr, Arr]], **_: Arr) -> dict[str, Arr]:
    """``items``: name -> (raw time c_i, exposed alone e_i, 1.0 where it uses the NICs else 0.0), per micro-batch.

    Returns exposed time per item after sharing, and ``hidden`` (total communication time run under compute,
    which still slows compute through SM and HBM interference).
    """
    names = list(items)
    raw = {k: np.maximum(items[k][0], 0.0) for k in names}
    alone = {k: np.clip(items[k][1], 0.0, raw[k]) for k in names}
    nic = {k: items[k][2] for k in names}
    zero = np.zeros_like(compute)
    sum_e = sum((alone[k] for k in names), zero)
    raw_nic = sum((raw[k] * nic[k] for k in names), zero)
    raw_nvl = sum((raw[k] * (1.0 - nic[k]) for k in names), zero)
    bound_nic = raw_nic - compute
    bound_nvl = raw_nvl - compute
    total = np.maximum(sum_e, np.maximum(bound_nic, bound_nvl))
    extra = total - sum_e
    nic_binds = bound_nic >= bound_nvl
    out: dict[str, Arr] = {}
    for k in names:
        on_stream = np.where(nic_binds, nic[k], 1.0 - nic[k])
        stream_raw = np.where(nic_binds, raw_nic, raw_nvl)
        room = raw[k] - alone[k]
        share = np.where(stream_raw > 0, raw[k] * on_stream / np.maximum(stream_raw, 1e-30), 0.0)
        out[k] = alone[k] + np.minimum(extra * share, room)
    out["hidden"] = sum((raw[k] - out[k] for k in names), zero)
    return out
