"""The engine's own collective equations, seen from a nccl-tests run: the one place that calls the model.

The engine times a collective of ``n`` ranks with NCCL's structure (:mod:`engine.performance.collectives.tuning`:
per algorithm and protocol, latency steps plus bytes over the bus bandwidth of the tier the traffic
crosses, minimum taken). Calibration keeps those equations and fits, per collective kind and scope, the
parameters the model exposes for it:

* across nodes (``inter``): ``eta`` = multiplier on the node's NIC bandwidth for that kind
  (``Context.net_bw_scale[kind]``) and ``alpha`` = the per-step network latency (``Context.net_alpha_s``);
* inside one NVLink domain (``intra``): ``eta`` = multiplier on the NVLink efficiencies
  (``GpuSpec.nvlink_ar_eff`` for all-reduce, ``nvlink_ring_eff`` for the rest) and ``lam`` = multiplier on
  the model's small-message latency (reported; the engine has no NVLink-latency parameter to carry it).

Because they are parameters of the model rather than a table replacing its curve, a profile fitted on 16-rank
nccl-tests runs also moves the 512-rank data-parallel all-reduce of a training step the way the fabric's
physics says it should.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.p2p import p2p_time
from engine.performance.collectives.placement import place
from engine.performance.collectives.tuning import collective_time
from engine.performance.context import Context, make_context
from engine.performance.hardware import gpu_spec
from engine.units import Arr

# nccl-tests name -> the engine's collective kind
KIND = {"all_reduce": "ar", "all_gather": "ag", "reduce_scatter": "rs", "alltoall": "a2a", "sendrecv": "p2p"}
COLLECTIVE_OF_KIND = {v: k for k, v in KIND.items()}
SCOPES = ("intra", "inter")

# A small dense model; only the cluster section matters for collective curves, but the engine's context is
# built from a whole scenario document (one parser of the document, no second path).
_PROBE_MODEL = {"name": "calibration-probe", "layers": 2, "hidden": 1024, "heads": 8, "vocab": 32000,
                "seq_len": 2048}


def fleet_context(cluster: Mapping[str, Any], catalog: CatalogItems | None = None, min_gpus: int = 1) -> Context:
    """The engine's Context for ``cluster`` (a scenario ``cluster`` section), with at least ``min_gpus`` GPUs."""
    cl = dict(cluster)
    gpus = int(cl.get("gpus", min_gpus))
    cl["gpus"] = max(gpus, int(min_gpus))
    gpn = int(cl.get("gpus_per_node", 8))
    if cl["gpus"] > gpn and cl["gpus"] % gpn:
        cl["gpus"] = (cl["gpus"] // gpn + 1) * gpn
    doc = {
        "model": _PROBE_MODEL,
        "training": {"global_batch": cl["gpus"], "micro_batch": 1, "tokens": 1e9, "recompute": "none", "zero": 1},
        "parallelism": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": False},
        "cluster": cl,
    }
    s = parse_scenario(doc, catalog)
    return make_context(s, gpu_spec(s.cluster.gpu, catalog))


def scope_of(ranks: int, nodes: int | None, gpus_per_node: int) -> str:
    """'intra' when every rank sits in one node (NVLink only), else 'inter'."""
    if nodes is not None:
        return "intra" if nodes <= 1 else "inter"
    return "intra" if ranks <= gpus_per_node else "inter"


def model_time(ctx: Context, kind: str, sizes: Arr, ranks: int) -> Arr:
    """The engine's time (seconds) of one collective of ``kind`` over ``ranks`` consecutive ranks.

    ``sizes`` follow nccl-tests' size column: the reduced buffer (all-reduce), the full gathered / scattered
    buffer (all-gather, reduce-scatter), the send buffer (alltoall), the message (sendrecv).
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    net = ctx.net
    if kind == "p2p":
        # nccl-tests sendrecv: rank r sends to r+1 around a ring; across nodes the slowest pair crosses the NIC
        stride = net.domain if ranks > net.domain else 1.0
        return np.asarray(p2p_time(net, sizes, np.full_like(sizes, stride)), dtype=np.float64)
    n = np.full_like(sizes, float(ranks))
    return np.asarray(collective_time(net, CollectiveKind(kind), sizes, n, np.ones_like(sizes)), dtype=np.float64)


def with_inter(ctx: Context, kind: str, eta: float, alpha_s: float | None) -> Context:
    """``ctx`` with the NIC bandwidth of ``kind`` x ``eta`` and (when given) the per-step network latency."""
    scale = dict(ctx.net_bw_scale)
    scale[kind] = float(eta)
    return dataclasses.replace(ctx, net_bw_scale=scale,
                               net_alpha_s=ctx.net_alpha_s if alpha_s is None else float(alpha_s))


def has_nvls(ctx: Context) -> bool:
    """The model reduces all-reduce in the NVSwitch (NVLS) when the GPU's all-reduce efficiency exceeds its ring's."""
    return ctx.gpu.nvlink_ar_eff > ctx.gpu.nvlink_ring_eff


def with_intra(ctx: Context, kind: str, eta: float) -> Context:
    """``ctx`` with the NVLink efficiency ``kind`` uses x ``eta``: all-reduce with NVLS its own efficiency;
    every other case (and all-reduce on GPUs without NVLS, a ring) the ring efficiency, with the all-reduce
    one kept equal so the model does not switch algorithm."""
    g = ctx.gpu
    if kind == "ar" and has_nvls(ctx):
        gpu = dataclasses.replace(g, nvlink_ar_eff=g.nvlink_ar_eff * eta)
    elif has_nvls(ctx):
        gpu = dataclasses.replace(g, nvlink_ring_eff=g.nvlink_ring_eff * eta)
    else:
        gpu = dataclasses.replace(g, nvlink_ring_eff=g.nvlink_ring_eff * eta, nvlink_ar_eff=g.nvlink_ar_eff * eta)
    return dataclasses.replace(ctx, gpu=gpu)


def calibrated_time(ctx: Context, kind: str, scope: str, sizes: Arr, ranks: int, eta: float,
                    alpha_or_lam: float) -> Arr:
    """The model's time with the fitted parameters of ``scope``.

    inter: ``alpha_or_lam`` is the per-step network latency in seconds (the engine's own parameter);
    intra: it multiplies the model's zero-byte latency, ``t = t_eta(S) - (1 - lam) * t(0)``.
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    if scope == "inter":
        return model_time(with_inter(ctx, kind, eta, alpha_or_lam), kind, sizes, ranks)
    c2 = with_intra(ctx, kind, eta)
    lat = model_time(c2, kind, np.zeros_like(sizes), ranks)
    return np.asarray(model_time(c2, kind, sizes, ranks) - (1.0 - alpha_or_lam) * lat, dtype=np.float64)


def model_alpha_s(ctx: Context, ranks: int) -> float:
    """The per-step network latency the model uses for a group of ``ranks`` consecutive ranks."""
    p = place(ctx.net, np.asarray([float(ranks)]), np.asarray([1.0]))
    return float(p.hop[0])


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests busbw / algbw (doc/PERFORMANCE.md)."""
    n = float(ranks)
    if collective == "all_reduce":
        return 2.0 * (n - 1.0) / n
    if collective == "sendrecv":
        return 1.0
    return (n - 1.0) / n


def busbw_gbytes_s(collective: str, ranks: int, sizes: Arr, seconds: Arr) -> Arr:
    return np.asarray(np.asarray(sizes) * bus_factor(collective, ranks) / np.asarray(seconds) / 1e9,
                      dtype=np.float64)
