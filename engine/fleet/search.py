"""Purchase search: the cheapest candidate purchase that meets every deadline at the chosen confidence.

Each option (buy nothing, or one candidate: GPU x link speed x fabric x size x delivery day, expanded from the
plan's ``candidates``) is simulated with the same seeds (common random numbers, so options differ by the
purchase, not by luck). An option *meets the deadlines at confidence q* when at least a fraction q of its
replications miss no deadline (q = 0.9: P90). Its cost is the cash it spends inside the horizon: the capex
at delivery plus the opex for its days in service (both from the TCO model). Options whose capex exceeds
``budget_usd`` are refused. The winner is the cheapest option that meets the deadlines within budget; every
other option is listed with the reason it loses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from engine.catalog import CatalogItems
from engine.errors import ScenarioError
from engine.fleet.core import Progress, prepare, simulate_prepared
from engine.fleet.metrics import band, band_censored, cents
from engine.fleet.plan import FleetCluster, Plan, parse_plan


def _usd(x: float) -> str:
    return f"${x / 1e6:,.1f}M" if abs(x) >= 1e6 else f"${x:,.0f}"


def _evaluate(p: Plan, cand: FleetCluster | None, seeds: list[int], catalog: CatalogItems | None,
              tick: Callable[[], None]) -> dict[str, Any]:
    clusters = p.clusters + ((cand,) if cand is not None else ())
    prep = prepare(p, catalog, clusters=clusters)
    runs = []
    for s in seeds:
        runs.append(simulate_prepared(prep, s))
        tick()
    misses = [r["deadlines_missed"] for r in runs]
    missed_jobs: Counter[str] = Counter()
    for r in runs:
        missed_jobs.update(j["name"] for j in r["jobs"] if j["deadline_met"] is False)
    capex = opex = 0.0
    if cand is not None and prep.costs is not None:
        cost = prep.costs[-1]
        capex = cents(cost["capex_usd"])
        days = max(min(cand.retire_day, p.horizon_days) - cand.in_service_day, 0.0)
        opex = cents(cost["annual_opex_usd"] * days / 365.0)
    ok = sum(1 for m in misses if m == 0)
    ok_share = ok / len(runs)
    return {
        "option": cand.name if cand is not None else "buy nothing",
        "purchase": None if cand is None else {
            "gpu": cand.spec.gpu, "gpus": cand.spec.gpus, "nic_gbps": cand.spec.nic_gbps, "fabric": cand.spec.fabric,
            "topology": cand.spec.topology, "in_service_day": cand.in_service_day},
        "capex_usd": capex,
        "opex_in_horizon_usd": opex,
        "cost_usd": cents(capex + opex),
        "replications": len(runs),
        "replications_meeting_all_deadlines": ok,
        "share_meeting_all_deadlines": ok_share,
        "deadlines_missed": band([float(m) for m in misses]),
        "deadlines_missed_at_confidence": float(np.quantile(np.asarray(misses, dtype=float), p.confidence)),
        "most_missed": [n for n, _ in missed_jobs.most_common(3)],
        "utilization": band([r["utilization"] for r in runs]),
        "first_shortfall_day": band_censored([r["first_shortfall_day"] for r in runs]),
        "first_shortfall_days": [r["first_shortfall_day"] for r in runs],  # per seed, in seed order
        "usd_per_delivered_gpu_hour": band([r["costs"]["usd_per_delivered_gpu_hour"] for r in runs])
        if all("costs" in r for r in runs) else None,
        "meets_deadlines": ok_share >= p.confidence - 1e-12,
        "within_budget": p.budget_usd is None or capex <= p.budget_usd,
    }


def _why(opt: dict[str, Any], best: dict[str, Any] | None, p: Plan) -> str:
    q = round(p.confidence * 100)
    if not opt["within_budget"]:
        return f"capex {_usd(opt['capex_usd'])} exceeds the budget of {_usd(p.budget_usd or 0.0)}"
    if not opt["meets_deadlines"]:
        names = ", ".join(opt["most_missed"]) or "deadlines"
        return (f"misses {opt['deadlines_missed_at_confidence']:g} deadline(s) at P{q} (all met in only "
                f"{opt['replications_meeting_all_deadlines']} of {opt['replications']} replications; most often "
                f"{names})")
    if best is None:
        return "meets the deadlines"
    extra = opt["cost_usd"] - best["cost_usd"]
    if extra <= 0:
        return "ties with the recommendation on cost; the recommendation sorts first"
    return f"meets the deadlines but costs {_usd(extra)} more in the horizon than {best['option']}"


def _day(band_: dict[str, Any]) -> str:
    d = band_.get("p50")
    return "none within the horizon" if d is None else f"day {d:.0f}"


def _headline(best: dict[str, Any] | None, nothing: dict[str, Any], note: str | None, n: int, seeds: list[int],
              p: Plan) -> str:
    """One line that says what the recommendation rests on: the replications and the seeds every option shared."""
    basis = (f"{n} replication{'s' if n != 1 else ''} (seeds {seeds[0]}-{seeds[-1]}, the same for every option)"
             if n > 1 else f"1 replication (seed {seeds[0]})")
    if best is None:
        return f"{note}; over {basis}"
    if best is nothing:
        return (f"buy nothing: every deadline met in {best['replications_meeting_all_deadlines']} of {n} "
                f"replications (P{round(p.confidence * 100)} target); over {basis}")
    return (f"{best['option']}: every deadline met in {best['replications_meeting_all_deadlines']} of {n} "
            f"replications (P{round(p.confidence * 100)} target) for {_usd(best['capex_usd'])} capex; first shortfall "
            f"P50 {_day(best['first_shortfall_day'])} vs {_day(nothing['first_shortfall_day'])} buying nothing; "
            f"over {basis}")


def search_purchases(plan: Mapping[str, Any] | Plan, replications: int | None = None, seed: int = 0,
                     progress: Progress | None = None, catalog: CatalogItems | None = None) -> dict[str, Any]:
    """Evaluate buying nothing and each candidate; recommend the cheapest that meets the deadlines."""
    p = plan if isinstance(plan, Plan) else parse_plan(plan, catalog)
    if not p.candidates:
        raise ScenarioError("candidates", "is required for a purchase search (a list of clusters to buy)")
    if not p.costs_enabled:
        raise ScenarioError("costs", "a purchase search prices the candidates: costs must not be false")
    n = replications if replications is not None else p.replications
    seeds = list(range(seed, seed + n))
    total = n * (len(p.candidates) + 1)
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    options = [_evaluate(p, None, seeds, catalog, tick)]
    options += [_evaluate(p, c, seeds, catalog, tick) for c in p.candidates]
    ranked = sorted(options, key=lambda o: (not (o["meets_deadlines"] and o["within_budget"]), o["cost_usd"],
                                            o["option"]))
    best = ranked[0] if ranked[0]["meets_deadlines"] and ranked[0]["within_budget"] else None
    alternatives = []
    for o in ranked:
        if o is best:
            continue
        alternatives.append({**o, "why_it_loses": _why(o, best, p)})
    note = None
    if best is None:
        closest = max(options, key=lambda o: (o["within_budget"], o["share_meeting_all_deadlines"], -o["cost_usd"]))
        note = (f"no option meets every deadline at P{round(p.confidence * 100)}; the closest is {closest['option']} "
                f"(all met in {closest['replications_meeting_all_deadlines']} of {n} replications)")
    return {
        "confidence": p.confidence,
        "replications": n,
        "seeds": [seeds[0], seeds[-1]],
        "headline": _headline(best, options[0], note, n, seeds, p),
        "budget_usd": p.budget_usd,
        "recommendation": best,
        "alternatives": alternatives,
        "note": note,
    }
