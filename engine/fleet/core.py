"""Entry points: ``simulate_fleet(plan, seed)`` (one replication) and ``simulate_replications``.

``prepare`` does everything that does not depend on the seed once (parse, engine run times, failure rates,
costs); ``simulate_prepared`` runs one replication from it, so replications and purchase options share it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.catalog import CatalogItems
from engine.fleet.costs import cluster_cost, horizon_cost
from engine.fleet.dists import generator, key64, keys64, sample
from engine.fleet.metrics import QUARTER_DAYS, cents, cents_int, collect, summarize, weekly
from engine.fleet.plan import FleetCluster, Plan, parse_plan
from engine.fleet.runtime import (
    ClusterReliability,
    JobOption,
    cluster_reliability,
    job_options,
    make_option,
)
from engine.fleet.scheduler import ScheduledFleet
from engine.fleet.sim import Job

Progress = Callable[[int, int], None]


@dataclass
class Prepared:
    plan: Plan
    clusters: tuple[FleetCluster, ...]
    rels: list[ClusterReliability]
    named: list[list[JobOption]]
    costs: list[dict[str, float]] | None
    catalog: CatalogItems | None = None
    templates: dict[tuple[int, int], JobOption] = field(default_factory=dict)

    def option_for(self, c: int, gpus: int, work: float) -> JobOption:
        tpl = self.templates.get((c, gpus))
        if tpl is None:
            tpl = make_option(c, self.clusters[c], self.rels[c], self.plan.failures, gpus, 0.0)
            self.templates[(c, gpus)] = tpl
        return dataclasses.replace(tpl, work_days=work)


def _path(plan: Plan, c: FleetCluster, i: int) -> str:
    if c.purchased:
        return f"candidates[{plan.candidates.index(c)}]" if c in plan.candidates else "candidates"
    return f"clusters[{i}]"


def prepare(plan: Plan | Mapping[str, Any], catalog: CatalogItems | None = None,
            clusters: tuple[FleetCluster, ...] | None = None) -> Prepared:
    """Parse (when given a document) and resolve everything seed-independent."""
    p = plan if isinstance(plan, Plan) else parse_plan(plan, catalog)
    cl = clusters if clusters is not None else p.clusters
    rels = [cluster_reliability(c, p.failures, catalog, _path(p, c, i)) for i, c in enumerate(cl)]
    named = [job_options(j, f"jobs[{i}]", cl, rels, p.failures, catalog)
             for i, j in enumerate(p.jobs)]
    costs = [cluster_cost(c, p.costs, _path(p, c, i), catalog) for i, c in enumerate(cl)] if p.costs_enabled else None
    return Prepared(p, cl, rels, named, costs, catalog)


def _streams(prep: Prepared, seed: int, start_id: int, fifo: bool) -> tuple[list[Job], int]:
    """Every stream's jobs, each stream from its own generators (common random numbers, engine.fleet.dists):
    arrival count and times, sizes, durations and the jobs' failure keys depend only on the seed and the
    stream's name, so they are the same for every purchase option."""
    p = prep.plan
    cl = prep.clusters
    train_nodes = [c.training_gpus // c.gpus_per_node for c in cl]
    # sizes are clipped to the plan's own largest cluster, not to a purchase option's: demand is the same
    # whatever is bought
    max_gpus = max(c.training_gpus for c in p.clusters)
    jobs: list[Job] = []
    unschedulable = 0
    jid = start_id
    seen: dict[str, int] = {}
    for si, s in enumerate(p.streams):
        occ = seen[s.name] = seen.get(s.name, -1) + 1
        rng = generator(seed, "arrivals", s.name, occ)
        n = int(rng.poisson(s.rate_per_day * (s.end_day - s.start_day)))
        times = np.sort(rng.uniform(s.start_day, s.end_day, n))
        gpus = np.clip(np.ceil(sample(s.gpus, n, generator(seed, "sizes", s.name, occ))), 1,
                       max_gpus).astype(np.int64)
        durations = np.maximum(sample(s.duration_days, n, generator(seed, "durations", s.name, occ)), 1e-6)
        rkeys = keys64(seed, n, "failures", s.name, occ)
        elig_cache: dict[int, tuple[int, ...]] = {}
        for t, g, dur, rk in zip(times.tolist(), gpus.tolist(), durations.tolist(), rkeys, strict=True):
            elig = elig_cache.get(g)
            if elig is None:
                elig = tuple(c for c in range(len(cl)) if (s.cluster is None or s.cluster == c)
                             and -(-g // cl[c].gpus_per_node) <= train_nodes[c])
                elig_cache[g] = elig
            if not elig:
                unschedulable += 1
            jobs.append(Job(jid, s.name, si, s.team, g, s.priority, t, None, {}, elig, fifo, dur, rk))
            jid += 1
    return jobs, unschedulable


def simulate_prepared(prep: Prepared, seed: int = 0) -> dict[str, Any]:
    """One replication (deterministic in ``seed``: same plan and seed, same result bit for bit)."""
    p = prep.plan
    spec = [(c.spec.gpus, c.gpus_per_node, max(1, c.spec.pod_gpus // c.gpus_per_node),
             -(-c.reserved_gpus // c.gpus_per_node), c.in_service_day, c.retire_day) for c in prep.clusters]
    fifo = p.policy.name == "fifo"  # priority and backfill order the queue by priority, then submit time
    sim = ScheduledFleet(float(p.horizon_days), spec, p.policy.name, p.policy.preemption, p.policy.backfill_depth,
                p.failures.repair_days if p.failures.enabled else 0.0, prep.option_for)
    unschedulable = 0
    seen: dict[str, int] = {}
    for i, (j, opts) in enumerate(zip(p.jobs, prep.named, strict=True)):
        options = {o.cluster: o for o in opts}
        gpus = j.gpus if j.gpus is not None else (opts[0].gpus if opts else 0)
        unschedulable += 0 if opts else 1
        occ = seen[j.name] = seen.get(j.name, -1) + 1
        sim.add_job(Job(i, j.name, -1, j.team, gpus, j.priority, j.submit_day, j.deadline_day, options,
                        tuple(sorted(options)), fifo, rkey=key64(seed, "failures", "job", j.name, occ)))
    stream_jobs, unsched = _streams(prep, seed, len(p.jobs), fifo)
    unschedulable += unsched
    for job in stream_jobs:
        sim.add_job(job)
    sim.run()
    names = [c.name for c in prep.clusters]
    daily: dict[str, Any] = {}
    result = collect(sim, p.horizon_days, names, len(p.jobs), [s.name for s in p.streams], unschedulable, daily)
    result["seed"] = seed
    result["policy"] = p.policy.name + (" with preemption" if p.policy.preemption else "")
    if prep.costs is not None:
        result["costs"] = cost_section(prep, result)
    result["quarters"] = quarters(prep, daily)
    return result


MONEY_KEYS = ("capex_usd", "annual_opex_usd", "annual_tco_usd")


def cost_section(prep: Prepared, result: dict[str, Any]) -> dict[str, Any]:
    """Each cluster's capex, annual opex and TCO and its cost in the horizon, to the cent (sums of cents are
    exact), and the cost per delivered GPU-hour."""
    assert prep.costs is not None
    H = float(prep.plan.horizon_days)
    per: dict[str, Any] = {}
    total = 0
    for c, cost in zip(prep.clusters, prep.costs, strict=True):
        hc = cents_int(horizon_cost(c, cost, H))
        total += hc
        money = {k: cents(cost[k]) for k in MONEY_KEYS if k in cost}
        per[c.name] = {**cost, **money, "horizon_cost_usd": hc / 100, "purchased": c.purchased or c.in_service_day > 0}
    productive = result["gpu_hours"]["productive"]
    tokens = sum(t["tokens_delivered"] for t in result["teams"].values())
    usd_gh = total / 100 / productive if productive > 0 else None
    token_hours = sum(t["gpu_hours_delivered"] for t in result["teams"].values() if t["tokens_delivered"] > 0)
    return {
        "clusters": per,
        "horizon_cost_usd": total / 100,
        "usd_per_delivered_gpu_hour": usd_gh,
        "usd_per_million_tokens": (usd_gh * token_hours / (tokens / 1e6)) if usd_gh and tokens > 0 else None,
        "stranded_usd": cents(result["stranded_gpu_hours"] * usd_gh) if usd_gh else 0.0,
    }


def quarters(prep: Prepared, daily: dict[str, Any]) -> list[dict[str, Any]]:
    """GPU-hours demanded vs delivered, capex, opex and TCO per 91.3-day quarter.

    GPU-hours are the correctly rounded sums (``math.fsum``) of the unrounded daily series (:func:`.metrics.
    fleet_daily`): full precision, no summation noise. Money is in cents: a delivery's capex lands whole in its
    quarter; a cluster's opex and TCO accrue per day in service and are split over the quarters by cumulative
    rounding, so each cluster's quarters add up to its cost in the horizon (``costs.clusters[name].
    horizon_cost_usd``) to the cent, and the quarters' TCO to ``costs.horizon_cost_usd``.
    """
    H = prep.plan.horizon_days
    waiting, alloc, prod = daily["waiting"], daily["allocated"], daily["productive"]
    out: list[dict[str, Any]] = []
    q = 0
    while q * QUARTER_DAYS < H:
        d0, d1 = round(q * QUARTER_DAYS), min(round((q + 1) * QUARTER_DAYS), H)
        row: dict[str, Any] = {"quarter": q + 1, "start_day": d0, "end_day": d1,
                               "gpu_hours_demanded": math.fsum((alloc[d0:d1] + waiting[d0:d1]).tolist()) * 24.0,
                               "gpu_hours_delivered": math.fsum(prod[d0:d1].tolist()) * 24.0}
        if prep.costs is not None:
            capex = opex = amort = 0
            for c, cost in zip(prep.clusters, prep.costs, strict=True):
                if (c.purchased or c.in_service_day > 0) and d0 <= c.in_service_day < d1:
                    capex += cents_int(cost["capex_usd"])

                def upto(day: float, c: FleetCluster = c) -> float:  # days in service before ``day``
                    return max(min(c.retire_day, day, H) - c.in_service_day, 0.0)

                opex += cents_int(cost["annual_opex_usd"] * upto(d1) / 365.0) - cents_int(
                    cost["annual_opex_usd"] * upto(d0) / 365.0)
                amort += cents_int(cost["annual_tco_usd"] * upto(d1) / 365.0) - cents_int(
                    cost["annual_tco_usd"] * upto(d0) / 365.0)
            row.update(capex_usd=capex / 100, opex_usd=opex / 100, tco_usd=amort / 100,
                       usd_per_delivered_gpu_hour=amort / 100 / row["gpu_hours_delivered"]
                       if row["gpu_hours_delivered"] > 0 else None)
        out.append(row)
        q += 1
    return out


def simulate_fleet(plan: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
    """Simulate one replication of a capacity plan (see docs/fleet-model.md for the document and the model)."""
    return simulate_prepared(prepare(plan), seed)


def simulate_replications(plan: Mapping[str, Any] | Plan, replications: int | None = None, seed: int = 0,
                          progress: Progress | None = None, catalog: CatalogItems | None = None) -> dict[str, Any]:
    """``replications`` seeds (seed, seed+1, ...): P10/P50/P90 summary plus the first replication in full."""
    prep = prepare(plan, catalog)
    n = replications if replications is not None else prep.plan.replications
    results = []
    for i in range(n):
        results.append(simulate_prepared(prep, seed + i))
        if progress is not None:
            progress(i + 1, n)
    return {"summary": summarize(results), "replications": [compact(r) for r in results], "first": results[0]}


def compact(r: dict[str, Any]) -> dict[str, Any]:
    """A replication without its per-day arrays (for listing many); each cluster's series as weekly means."""
    out = {k: v for k, v in r.items() if k not in ("timeline", "demand", "jobs", "quarters")}
    out["weekly"] = weekly(r)
    return out
