"""Stragglers and jitter: a synchronous step waits for its slowest rank.

Every micro-batch ends in collectives that need all ranks of a group, and the step ends with a data-parallel
reduction over all of them, so the step takes the *maximum* over ranks of their compute time, not the mean.
With per-rank times ``mu (1 + cv Z_i)`` (Z_i independent standard normal) the expected maximum over ``n``
ranks is ``mu (1 + cv E[max Z])``; E[max Z] grows like sqrt(2 ln n) (order statistics of the normal, Gumbel
limit with the first correction term below).

Coefficient of variation (one global value, sourced):
* Sinha et al., "Not All GPUs Are Created Equal" (SC'22): across thousands of same-SKU GPUs under the same
  power cap, kernel throughput varies by several percent (clock and thermal variation at the power limit);
  production fleets screen out the slow tail (MegaScale Sec. 4 straggler detection, Llama 3 paper Sec. 3.3.4
  on 1-2% diurnal throughput variation from temperature), leaving a residual per-rank spread of about 1%.
* OS noise and kernel-launch jitter are a fraction of a percent per step once averaged over the
  micro-batches of a step.
We use cv = 0.8% of a rank's compute time per step. Network path variance is not added here: it is in the
routing model (ECMP collisions lower the share of the slowest path, routing.py).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]

COMPUTE_CV = 0.008


def expected_max_z(n: Arr | float) -> Arr:
    """E[max of n iid standard normals] (0 for n = 1): sqrt(2 ln n) - (ln ln n + ln 4 pi) / (2 sqrt(2 ln n)),
    exact to ~2% for n >= 8; the small-n values are tabulated order statistics."""
    n_a = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    small = {1: 0.0, 2: 0.5642, 3: 0.8463, 4: 1.0294, 5: 1.1630, 6: 1.2672, 7: 1.3522}
    ln = np.log(np.maximum(n_a, 8.0))
    a = np.sqrt(2.0 * ln)
    big = a - (np.log(ln) + math.log(4.0 * math.pi)) / (2.0 * a)
    out = big
    for k, v in small.items():
        out = np.where(np.round(n_a) == k, v, out)
    return np.asarray(out, dtype=np.float64)


def straggler_time(compute_s: Arr, ranks: Arr | float, cv: float = COMPUTE_CV) -> Arr:
    """Expected extra time per step from waiting for the slowest of ``ranks`` ranks."""
    return compute_s * cv * expected_max_z(ranks)
