"""Expert load imbalance in dropless MoE: the busiest expert-parallel rank sets the MoE layer's pace.

With dropless routing (Megatron-Core's default: ``moe_expert_capacity_factor = None``) every token goes to its
``top_k`` experts however many others chose them, and the grouped GEMM of a rank processes all tokens that
landed on its ``g = E / ep`` local experts. The combine all-to-all and the next layer wait for the slowest
rank, so the layer runs at the pace of the *most loaded* of the ``ep`` ranks, not the mean.

A rank's load (token-expert assignments, relative to the mean) has two independent sources of spread:

* sampling (balls into bins): ``A = tokens x top_k`` assignments per rank and micro-batch, each landing on a
  given rank with probability ``1/ep``; coefficient of variation ``sqrt((1 - 1/ep) / A)`` (binomial). Pure
  counting, no constant; it matters for small micro-batches and many EP ranks.
* routing preference: even with an auxiliary balance loss, experts do not receive equal shares. Wang et al.,
  "Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts" (arXiv 2408.15664, main results table) measure
  MaxVio_global = max_i load_i / mean_load - 1 = 0.52 for their 3B, 64-expert model trained with the usual
  auxiliary loss (0.72 at 1B). Reading MaxVio as the expected maximum of E experts with a normal spread
  ``cv_e``: ``cv_e = 0.52 / E[max Z_64] = 0.52 / 2.34 = 0.22`` (Blom, as below; one global constant, the
  larger model's value).
  A rank sums ``g`` of the ``E`` experts drawn without replacement, so its preference spread is
  ``cv_e sqrt((E - g) / (g (E - 1)))`` (zero when one rank holds all experts).

The expected maximum over ``ep`` ranks is ``1 + cv_rank E[max Z_ep]`` (normal order statistics, Blom's
approximation as in stragglers.py). The factor multiplies the tokens the busiest rank's routed-expert GEMMs
and activation passes process and the bytes it receives in the dispatch / sends in the combine all-to-all.
Model FLOPs (MFU) are unchanged: the imbalance is time, not work. Global, not per run: every MoE layout of
every model gets the same law.
"""

from __future__ import annotations

import numpy as np

from engine.performance.terms.stragglers import expected_max_z
from engine.units import Arr

# Wang et al. 2024 (arXiv 2408.15664), 3B aux-loss-controlled model: MaxVio_global 0.52 over E = 64 experts
MAXVIO_GLOBAL = 0.52
MAXVIO_EXPERTS = 64.0
EXPERT_LOAD_CV = MAXVIO_GLOBAL / float(expected_max_z(MAXVIO_EXPERTS))  # = 0.22


def rank_load_cv(experts: float, ep: Arr, assignments: Arr, cv_e: float | None = None) -> Arr:
    """Coefficient of variation of one EP rank's routed load (sampling and routing preference combined)."""
    cv_e = EXPERT_LOAD_CV if cv_e is None else cv_e
    ep = np.maximum(np.asarray(ep, dtype=np.float64), 1.0)
    g = np.maximum(experts / ep, 1.0)  # local experts per rank
    pref = cv_e * np.sqrt(np.maximum(experts - g, 0.0) / (g * max(experts - 1.0, 1.0)))
    samp = np.sqrt((1.0 - 1.0 / ep) / np.maximum(assignments, 1.0))
    return np.sqrt(pref ** 2 + samp ** 2)


def busiest_rank_factor(experts: float, ep: Arr, assignments: Arr, cv_e: float | None = None) -> Arr:
    """Expected load of the most loaded of ``ep`` ranks relative to the mean (1.0 without expert parallelism)."""
    ep_a = np.maximum(np.asarray(ep, dtype=np.float64), 1.0)
    f = 1.0 + rank_load_cv(experts, ep_a, assignments, cv_e) * expected_max_z(ep_a)
    return np.where(ep_a > 1.0, f, 1.0)
