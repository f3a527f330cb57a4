"""Turn a finished replication into the result document; P10/P50/P90 over replications.

The change log of :class:`.sim.Sim` is integrated once, vectorized: for each (row, quantity) the level is the
cumulative sum of its deltas, and the integral up to each day boundary is read off the piecewise-constant
level, giving the average GPUs of each quantity on each day.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.fleet.sim import (
    ALLOC,
    CAP,
    CKPT,
    FRAG,
    LOST,
    NQ,
    QUEUE,
    REPAIR,
    RES,
    RUN,
    WAITING,
    Job,
    Sim,
)
from engine.units import Arr

TIMELINE_KEYS = ("allocated", "productive", "failed", "idle", "fragmented", "repair", "reserved", "checkpoint",
                 "capacity")
QUARTER_DAYS = 365.25 / 4.0


def integrate(sim: Sim, horizon: int) -> Arr:
    """Daily averages, shape (rows, NQ, horizon): rows = clusters + the fleet row."""
    rows = sim.C + 1
    out = np.zeros((rows * NQ, horizon))
    if not sim.log_t:
        return out.reshape(rows, NQ, horizon)
    t = np.asarray(sim.log_t)
    k = np.asarray(sim.log_k, dtype=np.int64)
    d = np.asarray(sim.log_d)
    order = np.lexsort((t, k))
    t, k, d = t[order], k[order], d[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], len(k)]
    bounds = np.arange(horizon + 1, dtype=float)
    for s, e in zip(starts, ends, strict=True):
        ts, level = t[s:e], np.cumsum(d[s:e])
        cum = np.r_[0.0, np.cumsum(level[:-1] * np.diff(ts))]
        idx = np.searchsorted(ts, bounds, side="right") - 1
        safe = np.maximum(idx, 0)
        area = np.where(idx < 0, 0.0, cum[safe] + level[safe] * (bounds - ts[safe]))
        out[int(k[s])] = np.diff(area)
    return out.reshape(rows, NQ, horizon)


def cents_int(usd: float) -> int:
    """A sum of money in whole cents (half to even on the exact binary value, like ``round(usd, 2)``)."""
    return int((Decimal(float(usd)) * 100).to_integral_value(ROUND_HALF_EVEN))


def cents(usd: float) -> float:
    """A sum of money to the cent: rounded once, where it is made, so that sums of such amounts (added as whole
    cents) are exact and reconcile to the cent; never 6 significant figures, never float noise."""
    return cents_int(usd) / 100


SHORTFALL_WINDOW_DAYS = 7  # a shortfall is sustained demand over supply, not one busy afternoon


def shortfall_days(waiting: Arr, idle: Arr, window: int = SHORTFALL_WINDOW_DAYS) -> npt.NDArray[np.intp]:
    """Days ``d`` on which the GPUs asked by waiting jobs exceed the idle GPUs, averaged over ``[d, d+window)``
    (clipped at the horizon): demand exceeds supply for a week, not for one burst of arrivals."""
    n = len(waiting)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    cw, ci = np.r_[0.0, np.cumsum(waiting)], np.r_[0.0, np.cumsum(idle)]
    start = np.arange(n)
    end = np.minimum(start + window, n)
    w, i = cw[end] - cw[start], ci[end] - ci[start]
    return np.flatnonzero((w > i + 1e-9) & (waiting > 1e-9))


def _pct(values: Sequence[float] | Arr) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    p = np.percentile(a, [50, 90, 99])
    return {"mean": float(a.mean()), "p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2]),
            "max": float(a.max())}


def work_done(job: Job, horizon: float) -> float:
    """Fraction of the job's work completed by the horizon (in-progress work counted)."""
    opt = job.opt
    if opt is None or opt.work_days <= 0:
        return 0.0
    remaining = job.remaining
    if job.state == RUN:
        w = horizon - job.seg_start
        if math.isinf(opt.interval_days):
            remaining -= w
        else:
            period = opt.interval_days + opt.checkpoint_days
            n = int(w // period)
            remaining -= n * opt.interval_days + min(w - n * period, opt.interval_days)
    return min(max(1.0 - remaining / opt.work_days, 0.0), 1.0)


def timelines(daily: Arr, names: Sequence[str]) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for c, name in enumerate(names):
        row = daily[c]
        avail = row[CAP] - row[RES]
        alloc = row[ALLOC]
        series = {
            "allocated": alloc,
            "productive": np.maximum(alloc - row[LOST] - row[CKPT], 0.0),
            "failed": row[LOST] + row[REPAIR],
            "idle": np.maximum(avail - alloc - row[REPAIR], 0.0),
            "fragmented": row[FRAG],
            "repair": row[REPAIR],
            "reserved": row[RES],
            "checkpoint": row[CKPT],
            "capacity": row[CAP],
        }
        out[name] = {k: [round(float(x), 3) for x in v] for k, v in series.items()}
    return out


def fleet_daily(daily: Arr, clusters: int) -> dict[str, Arr]:
    """The fleet's daily GPUs allocated, productive and asked by waiting jobs, unrounded (the quarters' source)."""
    cl = daily[:clusters]
    alloc = cl[:, ALLOC].sum(axis=0)
    prod = np.maximum(cl[:, ALLOC] - cl[:, LOST] - cl[:, CKPT], 0.0).sum(axis=0)
    return {"allocated": alloc, "productive": prod, "waiting": daily[clusters, WAITING]}


def collect(sim: Sim, horizon: int, names: Sequence[str], named_count: int,
            stream_names: Sequence[str], unschedulable: int, keep: dict[str, Arr] | None = None) -> dict[str, Any]:
    """The replication's result document (costs are added by the caller); ``keep`` receives the fleet's unrounded
    daily series (:func:`fleet_daily`)."""
    daily = integrate(sim, horizon)
    if keep is not None:
        keep.update(fleet_daily(daily, sim.C))
    C = sim.C
    cl = daily[:C]
    avail = cl[:, CAP] - cl[:, RES]
    alloc_total = float(cl[:, ALLOC].sum())
    avail_total = float(avail.sum())
    lost = float(cl[:, LOST].sum())
    ckpt = float(cl[:, CKPT].sum())
    repair = float(cl[:, REPAIR].sum())
    frag = float(cl[:, FRAG].sum())
    idle_daily = np.maximum(avail - cl[:, ALLOC] - cl[:, REPAIR], 0.0).sum(axis=0)
    waiting_daily = daily[C, WAITING]
    short = shortfall_days(waiting_daily, idle_daily)
    jobs = sim.jobs
    waits = [j.first_start - j.submit for j in jobs if j.first_start is not None]
    completed = [j for j in jobs if j.end is not None]
    started = len(waits)
    named: list[dict[str, Any]] = []
    missed = met = unknown = 0
    first_miss: float | None = None
    for j in jobs[:named_count]:
        rec = job_record(j, horizon, names)
        if j.deadline is not None:
            if j.end is not None and j.end <= j.deadline + 1e-9:
                met += 1
            elif j.end is not None or j.deadline <= horizon:
                missed += 1
                first_miss = j.deadline if first_miss is None else min(first_miss, j.deadline)
            else:
                unknown += 1
        named.append(rec)
    teams: dict[str, dict[str, float]] = {}
    streams: list[dict[str, Any]] = [{"name": s, "submitted": 0, "started": 0, "completed": 0, "wait_sum": 0.0,
                                      "gpu_hours_delivered": 0.0} for s in stream_names]
    for j in jobs:
        frac = work_done(j, horizon)
        gh = frac * (j.opt.work_days * j.opt.gpus * 24.0 if j.opt is not None else 0.0)
        tm = teams.setdefault(j.team, {"gpu_hours_delivered": 0.0, "tokens_delivered": 0.0, "jobs_completed": 0})
        tm["gpu_hours_delivered"] += gh
        tm["tokens_delivered"] += frac * (j.opt.tokens if j.opt is not None else 0.0)
        tm["jobs_completed"] += 1 if j.end is not None else 0
        if j.stream >= 0:
            s = streams[j.stream]
            s["submitted"] += 1
            s["started"] += 1 if j.first_start is not None else 0
            s["completed"] += 1 if j.end is not None else 0
            s["wait_sum"] += (j.first_start - j.submit) if j.first_start is not None else 0.0
            s["gpu_hours_delivered"] += gh
    for s in streams:
        s["mean_wait_days"] = s.pop("wait_sum") / s["started"] if s["started"] else 0.0
    # Little's law on the queue, finite horizon: area under the queue-length curve = total time in queue
    area = float(daily[C, QUEUE].sum())
    visits = sum(j.visits for j in jobs)
    in_queue = sum(j.queue_time + ((horizon - j.enq) if j.state == 0 and j.visits else 0.0) for j in jobs)
    lam = visits / horizon
    w_mean = in_queue / visits if visits else 0.0
    little = {"queue_length_mean": area / horizon, "arrival_rate_per_day": lam, "mean_time_in_queue_days": w_mean,
              "relative_error": abs(area / horizon - lam * w_mean) / max(area / horizon, 1e-12) if area else 0.0}
    return {
        "horizon_days": horizon,
        "utilization": alloc_total / avail_total if avail_total > 0 else 0.0,
        "productive_utilization": (alloc_total - lost - ckpt) / avail_total if avail_total > 0 else 0.0,
        "lost_to_failures_fraction": (lost + repair) / avail_total if avail_total > 0 else 0.0,
        "fragmented_fraction": frag / avail_total if avail_total > 0 else 0.0,
        "wait_days": _pct(waits),
        "jobs_submitted": len(jobs),
        "jobs_started": started,
        "jobs_completed": len(completed),
        "jobs_waiting_at_end": sum(1 for j in jobs if j.first_start is None and j.elig),
        "jobs_unschedulable": unschedulable,
        "deadlines_met": met,
        "deadlines_missed": missed,
        "deadlines_beyond_horizon": unknown,
        "first_deadline_miss_day": first_miss,
        "first_shortfall_day": int(short[0]) if short.size else None,
        "interruptions": sum(j.interruptions for j in jobs),
        "preemptions": sum(j.preemptions for j in jobs),
        "node_repairs": sim.repairs,
        "gpu_hours": {
            "available": avail_total * 24.0, "allocated": alloc_total * 24.0,
            "productive": (alloc_total - lost - ckpt) * 24.0, "lost_to_failures": lost * 24.0,
            "checkpointing": ckpt * 24.0, "in_repair": repair * 24.0,
            "idle": float(idle_daily.sum()) * 24.0, "fragmented": frag * 24.0,
        },
        "stranded_gpu_hours": float(idle_daily.sum()) * 24.0,
        "demand": {"waiting_gpus": [round(float(x), 3) for x in waiting_daily],
                   "queue_jobs": [round(float(x), 3) for x in daily[C, QUEUE]]},
        "timeline": timelines(daily, names),
        "jobs": named,
        "streams": streams,
        "teams": teams,
        "littles_law": little,
        "events": sim.events,
    }


def job_record(j: Job, horizon: float, names: Sequence[str]) -> dict[str, Any]:
    opt = j.opt
    return {
        "name": j.name, "team": j.team, "cluster": names[j.cluster] if j.cluster >= 0 else None,
        "gpus": opt.gpus if opt is not None else j.gpus, "submit_day": j.submit, "start_day": j.first_start,
        "end_day": j.end, "deadline_day": j.deadline,
        "deadline_met": None if j.deadline is None or (j.end is None and j.deadline > horizon)
        else (j.end is not None and j.end <= j.deadline + 1e-9),
        "wait_days": (j.first_start - j.submit) if j.first_start is not None else None,
        "run_days_fault_free": opt.work_days if opt is not None else None,
        "fraction_done": work_done(j, horizon), "interruptions": j.interruptions, "preemptions": j.preemptions,
        "schedulable": bool(j.elig),
    }


SUMMARY_KEYS = ("utilization", "productive_utilization", "lost_to_failures_fraction", "fragmented_fraction",
                "jobs_completed", "deadlines_missed", "interruptions", "stranded_gpu_hours")


def band(values: Sequence[float | None]) -> dict[str, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"p10": None, "p50": None, "p90": None}
    p = np.percentile(np.asarray(vals, dtype=float), [10, 50, 90])
    return {"p10": float(p[0]), "p50": float(p[1]), "p90": float(p[2])}


def band_censored(values: Sequence[float | None]) -> dict[str, float | None]:
    """P10/P50/P90 of a day that may not come within the horizon (``None``: the first shortfall never came).

    Every replication counts: one without the event sorts after every day (it happened "later than the
    horizon"), and a percentile that falls on, or interpolates towards, such replications is ``None`` (none
    within the horizon). Dropping them instead would make an option that removes the shortfall in 8 of 10
    replications report the 2 early days left as its P50. Order-preserving: when every replication of option B
    has its first shortfall no earlier than the same seed's of option A, each of B's percentiles is no earlier.
    """
    if not values:
        return {"p10": None, "p50": None, "p90": None}
    days = sorted(math.inf if v is None else float(v) for v in values)
    out: dict[str, float | None] = {}
    for name, q in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9)):
        pos = q * (len(days) - 1)  # numpy's default ("linear") percentile, spelled out for the censored tail
        lo = math.floor(pos)
        hi = min(lo + 1, len(days) - 1)
        frac = pos - lo
        if math.isinf(days[lo]) or (frac > 0 and math.isinf(days[hi])):
            out[name] = None
        else:
            out[name] = days[lo] + (days[hi] - days[lo]) * frac if frac > 0 else days[lo]
    return out


def _headline_bands(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """P10/P50/P90 of the headline figures over replications (full or compact: both carry them)."""
    out: dict[str, Any] = {"replications": len(results)}
    for key in SUMMARY_KEYS:
        out[key] = band([float(r[key]) for r in results])
    out["wait_days_mean"] = band([r["wait_days"]["mean"] for r in results])
    out["wait_days_p90"] = band([r["wait_days"]["p90"] for r in results])
    shortfalls = [r["first_shortfall_day"] for r in results]
    out["first_shortfall_day"] = band_censored(shortfalls)
    out["replications_with_shortfall"] = sum(1 for s in shortfalls if s is not None)
    out["replications_meeting_all_deadlines"] = sum(1 for r in results if r["deadlines_missed"] == 0)
    if all("costs" in r for r in results):
        out["usd_per_delivered_gpu_hour"] = band([r["costs"]["usd_per_delivered_gpu_hour"] for r in results])
    return out


def _series_bands(series: Sequence[Sequence[float]]) -> dict[str, list[float]]:
    """Per-point P10/P50/P90 across replications of one series (rounded to 0.01 GPU)."""
    p = np.percentile(np.asarray(series, dtype=float), [10, 50, 90], axis=0)
    return {name: [round(float(x), 2) for x in row] for name, row in zip(("p10", "p50", "p90"), p, strict=True)}


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """P10/P50/P90 over replications of the headline figures and of each cluster's daily timeline."""
    if not results:
        raise ValueError("summarize needs at least one replication")
    out = _headline_bands(results)
    tl: dict[str, dict[str, dict[str, list[float]]]] = {}
    for name in results[0]["timeline"]:
        tl[name] = {}
        for key in ("allocated", "productive", "failed", "idle", "fragmented"):
            tl[name][key] = _series_bands([r["timeline"][name][key] for r in results])
        tl[name]["capacity"] = {"p50": results[0]["timeline"][name]["capacity"]}
    out["timeline"] = tl
    return out


WEEKLY_KEYS = ("allocated", "productive", "failed", "idle")


def weekly(result: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Each cluster's daily series averaged per 7-day week (compact enough to ship 1,000 replications)."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, tl in result["timeline"].items():
        out[name] = {}
        for key in WEEKLY_KEYS:
            v = np.asarray(tl[key], dtype=float)
            out[name][key] = [round(float(v[i:i + 7].mean()), 2) for i in range(0, len(v), 7)]
    return out


def summarize_compact(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """P10/P50/P90 over compact replications (no per-day arrays): the headline figures as :func:`summarize`
    computes them, and per-week bands of each cluster's series. Used to merge replications computed by
    several workers (the chord of a replication sweep)."""
    if not results:
        raise ValueError("summarize_compact needs at least one replication")
    out = _headline_bands(results)
    weeks: dict[str, dict[str, dict[str, list[float]]]] = {}
    if all("weekly" in r for r in results):
        for name in results[0]["weekly"]:
            weeks[name] = {}
            for key in WEEKLY_KEYS:
                weeks[name][key] = _series_bands([r["weekly"][name][key] for r in results])
    out["weekly"] = weeks
    return out
