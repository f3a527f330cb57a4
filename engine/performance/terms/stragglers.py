"""Stragglers and jitter: a synchronous step waits for its slowest rank.

Every micro-batch ends in collectives that need all ranks of a group, and the step ends with a data-parallel
reduction over all of them, so the step takes the *maximum* over ranks of their compute time, not the mean.
With per-rank times ``mu (1 + cv Z_i)`` (Z_i independent standard normal) the expected maximum over ``n``
ranks is ``mu (1 + cv E[max Z])``; E[max Z] grows like sqrt(2 ln n) (order statistics of the normal), computed
with Blom's approximation E[max Z_n] = Phi^-1((n - 0.375) / (n + 0.25)) (Blom 1958; 0.59, 1.43, 3.02, 3.23 against the
exact 0.56, 1.42, 3.04, 3.19 for n = 2, 8, 500, 1,024; 0 for n = 1).

Coefficient of variation (one global value, sourced):
* Sinha et al., "Not All GPUs Are Created Equal" (SC'22): across thousands of same-SKU GPUs under the same
  power cap, kernel throughput varies by several percent (clock and thermal variation at the power limit);
  production fleets screen out the slow tail (MegaScale Sec. 4 straggler detection, Llama 3 paper Sec. 3.3.4
  on 1-2% diurnal throughput variation from temperature), leaving a residual per-rank spread of about 1%.
* OS noise and kernel-launch jitter are a fraction of a percent per step once averaged over the
  micro-batches of a step.
We use cv = 0.8% of a rank's compute time per step. The mean bandwidth share of ECMP collisions is in the routing
model (routing.py); the run-to-run spread of a collective is a second source, below.

Network jitter (issue #22 item 3.3): a collective ends when its slowest rank's transfers end, so each exposed
collective adds ``t (cv_net E[max Z_n])`` where ``n`` is the number of ranks it waits for (TP, CP, EP, the
pipeline pair, the DP x CP group). ``cv_net`` is the run-to-run coefficient of variation of one collective,
set from the one component spread measured without a shared network: nccl-tests on one 8x H100 node
(Ultra-Scale Playbook, data/components/nccl_tests.json nccl-0070 / 0077 / 0084: 5th-95th percentile of
all-reduce / all-gather / reduce-scatter at 256 MB = 0.027 / 0.031 / 0.029 of the median over 3.29 sigma;
mean 0.029). A floor: the multi-node rows of the same source spread 4-40x wider (a shared EFA cluster), and
production studies see network fail-slows as the most frequent straggler source (Greyhound, ATC'25 s.3:
communication fail-slows in ~40% of the large jobs against <2% for computation; MegaScale, NSDI'24 s.4-5:
stragglers and network jitter diagnosed per rank by collective timing).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from engine.units import Arr

COMPUTE_CV = 0.008
# run-to-run CV of one collective's time (nccl-tests 5th-95th spread on one H100 node, nccl_tests.json
# nccl-0070/0077/0084: (0.027 + 0.031 + 0.029) / 3; see the module docstring)
NETWORK_CV = 0.029
# Blom's plotting position (n - alpha) / (n + 1 - 2 alpha), alpha = 0.375 (Blom 1958)
BLOM_ALPHA = 0.375
BLOM_DENOMINATOR_OFFSET = 0.25  # 1 - 2 alpha


def expected_max_z(n: Arr | float) -> Arr:
    """E[max of n iid standard normals] by Blom's formula, Phi^-1((n - 0.375) / (n + 0.25)) (0 for n <= 1), over
    a whole sweep at once (scipy.special.ndtri, the inverse of the standard normal CDF)."""
    n_a = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    return np.where(n_a > 1.0, ndtri((n_a - BLOM_ALPHA) / (n_a + BLOM_DENOMINATOR_OFFSET)), 0.0)


def straggler_time(compute_s: Arr, ranks: Arr | float, cv: float = COMPUTE_CV) -> Arr:
    """Expected extra time per step from waiting for the slowest of ``ranks`` ranks."""
    return compute_s * cv * expected_max_z(ranks)


def network_straggler_time(exposed_s: Arr, ranks: Arr | float, cv: float = NETWORK_CV) -> Arr:
    """Expected extra time of exposed collectives taking ``exposed_s`` that wait for ``ranks`` ranks each."""
    return np.asarray(exposed_s, dtype=np.float64) * cv * expected_max_z(ranks)
