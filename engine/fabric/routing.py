"""Routing and congestion: the share of a NIC's line rate that traffic crossing one switch tier gets.

Everything the engine knows about load balancing sits behind ONE function, :func:`crossing_share`, so that a
simulated table (the flow-level fabric simulator, issue #13) can replace these closed forms without touching
the collective model. Inputs are the offered load on the tier's uplinks, the flows each NIC opens and the
routing mode; the output is throughput / demand for the crossing traffic (1.0 = line rate).

Model (all closed forms, no per-case constant):

* **Offered load.** Every NIC of a leaf runs the same collective at the same time (all data-parallel groups
  step together). A fraction ``f`` of each NIC's bytes leaves the leaf (see ``collectives.tier_fractions``),
  and the leaf has ``1/r`` uplinks per down-link (oversubscription ``r``), so the offered load per uplink is
  ``load = f * r`` in units of one link's capacity (uplinks run at the NIC's link speed).
* **Adaptive routing / packet spraying** (InfiniBand AR, Spectrum-X-class Ethernet with SuperNICs, RoCE
  packet spraying): traffic is spread per packet or flowlet over all uplinks, so the only loss is the
  residual imbalance and reordering: ``share = min(1, AR_EFF / load)``.
  AR_EFF 0.97 on InfiniBand (Quantum-2 adaptive routing keeps 96-98% of bisection on all-to-all,
  NVIDIA AR whitepaper figures) and 0.95 on Ethernet (NVIDIA's Spectrum-X claim for xAI Colossus: 95%
  of data throughput, engine/validation/data/fabric_measurements.json).
* **ECMP** (per-flow hashing, RoCE default): each connection is one flow per queue pair, hashed to a
  uniformly random uplink. With ``m`` flows per uplink on average (balls into bins, Poisson(m) flows per
  uplink), each of weight ``w = 1/(flows per NIC)`` of a link, an uplink carries ``min(N*w, 1)``; the
  expected carried traffic over offered traffic is
  ``share = E[min(N w, 1)] / load`` with ``N ~ Poisson(load / w)``.
  At one flow per NIC and full load this is ``1 - 1/e = 0.63`` (the classic hashed-flow utilisation,
  Al-Fares et al. NSDI 2010; the Spectrum-X claim quotes 60% for standard Ethernet). More flows (NCCL
  channels x queue pairs per connection) smooth the hash: ``ecmp-qp`` (NCCL_IB_QPS_PER_CONNECTION=4)
  raises it to about 0.81 at full load, +27%, inside Meta's "up to +40%" for E-ECMP with QP scaling
  (Gangidi et al., SIGCOMM 2024). At light load (few crossing flows) collisions rarely matter and share
  tends to 1.
* **Static pinning** (one fixed path per destination, source routing or static LFTs): channels and QPs all
  follow the same path, so it behaves as ECMP with one flow per NIC — 37% below line rate at full load,
  matching Meta's ">30% degradation" for path pinning under fragmented placement.
"""

from __future__ import annotations

import numpy as np

from engine.fabric.tables import crossing_share_array
from engine.schema.enums import DEFAULT_QPS  # queue pairs per routing mode when the scenario does not say
from engine.units import Arr

# residual imbalance of adaptive routing / packet spraying (sources in the module docstring)
AR_EFF = {"infiniband": 0.97, "roce": 0.95}
# NCCL channels whose flows leave one NIC for inter-node rings/trees: NCCL opens 2 channels per NIC on
# rail-optimised 8-NIC HGX nodes (16 channels for 8 NICs, NCCL_MIN_NCHANNELS defaults, nccl-tests logs)
CHANNELS_PER_NIC = 2.0
# RoCE v2 transport relative to InfiniBand (hardware.PROTOCOL_EFF's reasoning): per 4096-byte MTU packet
# 82 B of Ethernet/IPv4/UDP/BTH/ICRC framing incl. preamble and gap vs 26 B on IB (-1.4%), and DCQCN
# congestion control runs ECMP fabrics about 4% below line rate to keep switch queues short (vendor tuning
# guides); adaptive-routing Ethernet (Spectrum-X class) replaces DCQCN by telemetry-based control.
ROCE_FRAMING_EFF = 1.0 - 0.014
DCQCN_HEADROOM_EFF = 0.96


def _ecmp_share(load: Arr, flows_per_nic: Arr) -> Arr:
    """E[min(N w, 1)] / load with N ~ Poisson(load / w), w = 1/flows_per_nic (balls into bins)."""
    w = 1.0 / np.maximum(flows_per_nic, 1.0)
    lam = np.maximum(load, 1e-12) / w
    kmax = int(np.ceil(float(np.max(1.0 / w))))
    # sum over k < K = ceil(1/w) of (1 - k w) P(N = k); the rest of the mass carries a full link
    shortfall = np.zeros_like(lam)
    pk = np.exp(-lam)
    for k in range(kmax):
        shortfall = shortfall + np.where(k * w < 1.0, (1.0 - k * w) * pk, 0.0)
        pk = pk * lam / (k + 1.0)
    carried = 1.0 - shortfall  # expected traffic per uplink, in link capacities
    return np.minimum(1.0, carried / np.maximum(load, 1e-12))


def crossing_share(routing: str, fabric: str, load: Arr | float, flows_per_nic: Arr | float,
                   qps_per_connection: float | None = None, pinned: float | None = None) -> Arr:
    """Throughput / demand of the traffic that crosses one tier (1.0 = every crossing NIC at line rate).

    ``load``: offered load per uplink in link capacities (crossing fraction x oversubscription).
    ``flows_per_nic``: connections (NCCL channels) each NIC spreads over the tier.
    ``routing``: ``ecmp``, ``ecmp-qp``, ``adaptive`` or ``pinned``; ``fabric``: ``infiniband`` or ``roce``.
    ``pinned``: the share a fabric study pinned to the scenario simulated for this routing
    (:mod:`engine.fabric.pinned_study`); it replaces the tables and closed forms, capped only by what the
    tier can carry at the offered load (``1 / load``).
    """
    load_a = np.asarray(load, dtype=np.float64)
    if pinned is not None:
        return np.minimum(float(pinned), 1.0 / np.maximum(load_a, 1.0))
    flows = np.asarray(flows_per_nic, dtype=np.float64) * np.ones_like(load_a)
    adaptive = np.minimum(1.0, AR_EFF.get(fabric, 0.95) / np.maximum(load_a, 1e-12))
    if routing == "adaptive":
        return adaptive
    if routing == "pinned":  # channels and QPs to one peer follow one static path: one flow per NIC
        one = np.ones_like(load_a)
        sim = _simulated_share("pinned", load_a, one, PINNED_PATTERN)
        return np.minimum(adaptive, _ecmp_share(load_a, one) if sim is None else sim)
    qps = float(qps_per_connection) if qps_per_connection else DEFAULT_QPS.get(routing, 1.0)
    # hashing also pays the transport's residual loss, so it is never above adaptive routing
    sim = _simulated_share("ecmp", load_a, flows * qps, SIMULATED_PATTERN)
    return np.minimum(adaptive, _ecmp_share(load_a, flows * qps) if sim is None else sim)


# The flow-level simulator's table (engine/fabric/data/fabric_tables.json, `make fabric-tables`, issue #13)
# replaces the closed forms above for hashed and pinned routing when it is present: same inputs (offered load per
# uplink, hashed flows per NIC), simulated on a leaf/spine with max-min fair sharing, for a job on its own nodes
# (the "aligned" pattern: ring/tree/DP neighbours across a leaf boundary). It adds what the closed form leaves out
# (max-min sharing among colliding flows, the second hash on the way down) and agrees with it where both apply (one
# hashed flow per NIC at full load: 0.635 simulated, 1 - 1/e = 0.632). Static routes are read from the "scattered"
# pattern: a route table is computed for the fabric, not for the job, and only a job whose ranks line up with it
# (D-mod-k on a packed job) escapes collisions; jobs on a shared fleet do not (Meta's >30% loss under
# fragmentation; simulated 0.65 at full load). Set USE_SIMULATED_TABLES = False to fall back to the closed forms.
USE_SIMULATED_TABLES = True
SIMULATED_PATTERN = "aligned"
PINNED_PATTERN = "scattered"


def _simulated_share(routing: str, load: Arr, flows: Arr, pattern: str) -> Arr | None:
    if not USE_SIMULATED_TABLES:
        return None
    out = crossing_share_array(routing, load, flows, pattern=pattern)
    return None if out is None else np.minimum(1.0, out)


def full_load_efficiency(routing: str, fabric: str, qps_per_connection: float | None = None) -> float:
    """Share at full load (every NIC crossing a 1:1 tier) with the default channel count: a summary figure."""
    return float(crossing_share(routing, fabric, 1.0, CHANNELS_PER_NIC, qps_per_connection))
