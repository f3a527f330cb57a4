"""What a job costs on a cluster: run time from the performance engine, interruption rate from the goodput model.

* A named job with a ``workload`` runs for ``predict(workload on the cluster at its size).time_to_train_days``
  (step time x steps), cached per (workload, cluster, size) so replications and purchase options reuse it.
  ``gpus: "auto"`` picks the smallest power-of-two node count whose run, stretched by the goodput model's
  effective training fraction, meets the deadline (the fastest size when none does).
* Interruptions of a job of ``g`` GPUs arrive as a Poisson process of rate ``g * r`` per day, where ``r`` is
  the cluster's per-GPU rate from the reliability catalog (:mod:`engine.cost.goodput`): GPU and HBM
  per GPU, host and software per node, NICs per NIC, and the fabric's switches, optics and cables shared
  in proportion to the GPUs the job holds. So the mean time to interruption falls as ``1 / g``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from engine.catalog import CatalogItems
from engine.cost.goodput import (
    ReliabilityModel,
    daly_interval_s,
    effective_fraction,
    load_reliability,
    param_count,
)
from engine.errors import ScenarioError
from engine.fleet.costs import catalog_key, cluster_plan, hosts_per_node
from engine.fleet.plan import Failures, FleetCluster, NamedJob
from engine.performance.api import predict

HARDWARE = ("gpu", "hbm", "host", "nic")  # a fault of these parts takes the node out for repair
_CACHE_LIMIT = 4096
_PREDICT_CACHE: dict[tuple[str, str, int], Prediction] = {}


@dataclass(frozen=True)
class ClusterReliability:
    rate_per_gpu_day: float  # interruptions per GPU-day of a job on this cluster
    hardware_share: float  # fraction of interruptions that send a node to repair
    restart_days: float
    storage_write_gbytes_per_s: float
    node_write_gbytes_per_s: float
    checkpoint_bytes_per_param: float
    hosts_per_node: int = 1  # OS hosts per scheduling node (checkpoint write bandwidth is per host)


@dataclass(frozen=True)
class JobOption:
    """How a job runs on one cluster."""

    cluster: int
    nodes: int
    gpus: int  # GPUs it holds (whole nodes)
    work_days: float  # fault-free compute time
    rate_per_day: float  # interruptions per day while it runs
    hardware_share: float
    checkpoint_days: float  # delta: one checkpoint write
    interval_days: float  # tau: compute between checkpoints (Daly); inf when failures are off
    restart_days: float
    tokens: float
    expected_days: float = 0.0  # expected wall time: work / goodput fraction, plus repair stalls without spares


def _counts_per_gpu(cluster: FleetCluster, catalog: CatalogItems | None, field: str) -> dict[str, float]:
    spec = cluster.spec
    scen, plan = cluster_plan(cluster, cluster.costs, field, catalog)
    g = float(spec.gpus)
    return {
        "gpu": 1.0,
        "node": hosts_per_node(scen, catalog) / spec.gpus_per_node,  # host and software faults count per OS host
        "nic": spec.nics_per_node / spec.gpus_per_node,
        "switch": float(plan.switches["total"]) / g,
        "transceiver": float(plan.transceiver_count) / g,
        "cable": float(plan.cable_count) / g,
    }


def cluster_reliability(cluster: FleetCluster, failures: Failures, catalog: CatalogItems | None,
                        field: str) -> ClusterReliability:
    model: ReliabilityModel = load_reliability(catalog)
    restart_min = failures.restart_min if failures.restart_min is not None else model.restart_min
    if not failures.enabled:
        return ClusterReliability(0.0, 0.0, 0.0, model.storage_write_gbytes_per_s, model.node_write_gbytes_per_s,
                                  model.checkpoint_bytes_per_param)
    per_gpu = _counts_per_gpu(cluster, catalog, field)
    total = hw = 0.0
    for comp, rate in model.rates.items():
        r = failures.rates.get(comp, rate) * per_gpu.get(model.per[comp], 0.0)
        total += r
        if comp in HARDWARE:
            hw += r
    return ClusterReliability(
        rate_per_gpu_day=failures.rate_scale * total,
        hardware_share=hw / total if total > 0 else 0.0,
        restart_days=restart_min / 1440.0,
        storage_write_gbytes_per_s=model.storage_write_gbytes_per_s,
        node_write_gbytes_per_s=model.node_write_gbytes_per_s,
        checkpoint_bytes_per_param=model.checkpoint_bytes_per_param,
        hosts_per_node=hosts_per_node(cluster_plan(cluster, cluster.costs, field, catalog)[0], catalog),
    )


def checkpoint_days(rel: ClusterReliability, failures: Failures, params: float, nodes: int) -> float:
    """Time to write one checkpoint: the job's state over min(storage, hosts x per-host) bandwidth."""
    if params <= 0:
        return failures.checkpoint_write_min / 1440.0
    bw = min(rel.storage_write_gbytes_per_s, nodes * rel.hosts_per_node * rel.node_write_gbytes_per_s) * 1e9
    return params * rel.checkpoint_bytes_per_param / bw / 86400.0


def make_option(cluster_index: int, cluster: FleetCluster, rel: ClusterReliability, failures: Failures,
                gpus: int, work_days: float, params: float = 0.0, tokens: float = 0.0) -> JobOption:
    gpn = cluster.gpus_per_node
    nodes = -(-gpus // gpn)
    held = nodes * gpn
    rate = rel.rate_per_gpu_day * held
    delta = checkpoint_days(rel, failures, params, nodes) if rate > 0 else 0.0
    tau = float(daly_interval_s(delta * 86400.0, 86400.0 / rate)) / 86400.0 if rate > 0 else math.inf
    opt = JobOption(cluster_index, nodes, held, work_days, rate, rel.hardware_share, delta, tau,
                    rel.restart_days if rate > 0 else 0.0, tokens)
    wall = work_days / max(goodput_fraction(opt), 1e-9)
    if nodes >= cluster.training_gpus // gpn:  # no spare node: each hardware fault waits for its repair
        wall += wall * rate * rel.hardware_share * failures.repair_days
    return replace(opt, expected_days=wall)


def goodput_fraction(opt: JobOption) -> float:
    """The goodput model's closed-form effective training fraction for this option (1 without failures)."""
    if opt.rate_per_day <= 0:
        return 1.0
    return float(effective_fraction(opt.interval_days * 86400.0, opt.checkpoint_days * 86400.0,
                                    opt.restart_days * 86400.0, 86400.0 / opt.rate_per_day))


def _scenario(workload: Mapping[str, Any], cluster: FleetCluster, gpus: int) -> dict[str, Any]:
    doc = {k: v for k, v in workload.items() if k in ("model", "training", "parallelism")}
    cl = dict(cluster.doc)
    cl["gpus"] = gpus
    doc["cluster"] = cl
    return doc


class Prediction(NamedTuple):
    """What the fleet needs of one engine prediction of a named job on a cluster size."""

    days: float  # fault-free run days (meaningless when not ``fits``)
    params: float  # model parameters
    fits: bool  # the best layout fits in GPU memory
    memory_gb: float  # its memory per GPU, GB
    limit_gb: float  # usable memory per GPU, GB


def predict_days(workload: Mapping[str, Any], cluster: FleetCluster, gpus: int,
                 catalog: CatalogItems | None) -> Prediction:
    """The engine's prediction of ``workload`` on ``gpus`` GPUs of ``cluster`` (cached)."""
    key = (json.dumps(workload, sort_keys=True, default=str),
           json.dumps([cluster.doc, catalog_key(catalog)], sort_keys=True, default=str), gpus)
    hit = _PREDICT_CACHE.get(key)
    if hit is not None:
        return hit
    doc = _scenario(workload, cluster, gpus)
    result = predict(doc, catalog)
    out = Prediction(float(result.time_to_train_days or 0.0), float(param_count(doc["model"])), bool(result.fits),
                     float(result.memory_gb_per_gpu), float(result.memory_limit_gb))
    if len(_PREDICT_CACHE) >= _CACHE_LIMIT:
        _PREDICT_CACHE.clear()
    _PREDICT_CACHE[key] = out
    return out


def cache_info() -> int:
    return len(_PREDICT_CACHE)


def _workload_option(job: NamedJob, path: str, ci: int, cluster: FleetCluster, rel: ClusterReliability,
                     failures: Failures, gpus: int, catalog: CatalogItems | None) -> JobOption | None:
    assert job.workload is not None
    try:
        pred = predict_days(job.workload, cluster, gpus, catalog)
    except ScenarioError as exc:
        if job.gpus is None:  # auto: sizes without a valid layout are skipped
            return None
        sub = exc.field
        where = f"{path}.gpus" if sub.startswith(("cluster", "parallelism")) else f"{path}.workload.{sub}"
        raise ScenarioError(where, f"on cluster {cluster.name!r} at {gpus} GPUs: {exc.message}") from exc
    if not pred.fits:
        # never scheduled: a layout that does not fit has no run time (job_options refuses the job when no
        # cluster of the plan can hold it)
        return None
    tokens = float(job.workload["training"].get("tokens", 0.0)) if isinstance(job.workload.get("training"),
                                                                                Mapping) else 0.0
    return make_option(ci, cluster, rel, failures, gpus, pred.days, pred.params, tokens)


def job_options(job: NamedJob, path: str, clusters: tuple[FleetCluster, ...], rels: list[ClusterReliability],
                failures: Failures, catalog: CatalogItems | None) -> list[JobOption]:
    """One option per cluster the job can run on (its pinned cluster only, when pinned)."""
    out: list[JobOption] = []
    unfit: list[str] = []
    for ci, cluster in enumerate(clusters):
        if job.cluster is not None and job.cluster != ci:
            continue
        cap = cluster.training_gpus
        gpn = cluster.gpus_per_node
        if job.workload is None:
            assert job.gpus is not None and job.duration_days is not None
            if job.gpus <= cap:
                out.append(make_option(ci, cluster, rels[ci], failures, job.gpus, job.duration_days))
            continue
        if job.gpus is not None:
            size = -(-job.gpus // gpn) * gpn
            if size <= cap:
                opt = _workload_option(job, path, ci, cluster, rels[ci], failures, size, catalog)
                if opt is not None:
                    out.append(opt)
                else:
                    pred = predict_days(job.workload, cluster, size, catalog)
                    unfit.append(f"on cluster {cluster.name!r} at {size} GPUs no parallel layout fits in its "
                                 f"{pred.limit_gb:.1f} GB per GPU")
            continue
        opt = _auto_size(job, path, ci, cluster, rels[ci], failures, catalog)
        if opt is not None:
            out.append(opt)
    if not out and unfit:
        raise ScenarioError(f"{path}.gpus", "does not fit in GPU memory on any cluster of the plan: "
                            + "; ".join(unfit) + " (more GPUs, a GPU with more memory, or a leaner workload)")
    return out


def _auto_size(job: NamedJob, path: str, ci: int, cluster: FleetCluster, rel: ClusterReliability,
               failures: Failures, catalog: CatalogItems | None) -> JobOption | None:
    """Smallest power-of-two node count meeting the deadline (binary search; run time falls with size)."""
    gpn = cluster.gpus_per_node
    max_nodes = cluster.training_gpus // gpn
    sizes = [gpn * (1 << k) for k in range(0, 31) if (1 << k) <= max_nodes]
    assert job.deadline_day is not None
    window = job.deadline_day - job.submit_day
    options: dict[int, JobOption | None] = {}

    def opt_at(i: int) -> JobOption | None:
        if i not in options:
            options[i] = _workload_option(job, path, ci, cluster, rel, failures, sizes[i], catalog)
        return options[i]

    def meets(i: int) -> bool:
        o = opt_at(i)
        return o is not None and o.work_days / max(goodput_fraction(o), 1e-9) <= window

    lo, hi = 0, len(sizes) - 1
    if not meets(hi):
        valid = [o for o in (opt_at(i) for i in range(len(sizes) - 1, -1, -1)) if o is not None]
        return min(valid, key=lambda o: o.work_days) if valid else None
    while lo < hi:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid + 1
    return opt_at(lo)
