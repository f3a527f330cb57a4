"""Capacity plans side by side (issue #14), and the planner's words for how a plan's figures moved.

Both a comparison of two plans (or two runs of one plan) and a re-evaluation diff read the plan figures of the
metric registry (:data:`simulations.metrics.PLAN`: utilization, first shortfall day, deadlines missed, cost per
delivered GPU-hour, ...), so a figure is named and judged the same way everywhere. Figures are P50 over the run's
replications, each with its P10-P90 band and whether the runs' bands overlap. A run whose result is not a
finished fleet run is refused, never compared as if it were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.errors import ValidationError
from planning.models import CapacityPlan
from simulations import metrics
from simulations.models import RunKind, RunStatus, SimulationRun
from simulations.services.capacity_plans import plan_runs

MAX_COMPARED = 4


def recommendation(result: Mapping[str, Any] | None) -> str | None:
    """The purchase search's answer in one phrase: ``buy B300 IB 4096 GPUs (day 90)``, ``buy nothing``, or
    ``no option meets the deadlines``; None when the run did not search."""
    purchase = (result or {}).get("purchase")
    if not isinstance(purchase, Mapping):
        return None
    best = purchase.get("recommendation")
    if not isinstance(best, Mapping):
        return "no option meets the deadlines"
    return str(best.get("option") or "buy nothing")


def _day(value: float | None) -> str:
    return "none" if value is None else f"day {value:,.0f}"


def shortfall_phrase(before: float | None, after: float | None) -> str | None:
    """``first shortfall moves from day 214 to day 188`` (None when it did not move by a whole day)."""
    if before is None and after is None:
        return None
    if before is None:
        return f"a shortfall now appears on {_day(after)} (none before)"
    if after is None:
        return f"no shortfall any more (was {_day(before)})"
    if round(before) == round(after):
        return None
    return f"first shortfall moves from {_day(before)} to {_day(after)}"


def _fmt(metric: metrics.Metric, value: float | None) -> str:
    if value is None:
        return "—"
    if metric.format == "pct":
        return f"{value * 100:.1f}%"
    if metric.format.startswith("usd"):
        return f"${value:,.2f}"
    if metric.format == "days":
        return f"{value:,.1f} days"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def plan_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Per-metric changes (registry plan figures) between two fleet results, and the planner-words headline:
    shortfall day first, then deadlines, utilization, cost, and the purchase recommendation."""
    changes: dict[str, Any] = {}
    for m in metrics.PLAN:
        a, b = metrics.value(before, m), metrics.value(after, m)
        if a != b:
            changes[m.path] = {"before": a, "after": b, "delta": None if a is None or b is None else b - a,
                               "delta_pct": None if a in (None, 0) or b is None else (b - a) / abs(a) * 100.0}
    words: list[str] = []
    spec = metrics.get("summary.first_shortfall_day.p50")
    if spec is not None and before is not None:
        phrase = shortfall_phrase(metrics.value(before, spec), metrics.value(after, spec))
        if phrase:
            words.append(phrase)
    for m in metrics.PLAN:
        if not m.reevaluation or m.path == "summary.first_shortfall_day.p50" or m.path not in changes:
            continue
        a, b = changes[m.path]["before"], changes[m.path]["after"]
        if m.format == "pct" and a is not None and b is not None and abs(b - a) < 0.0005:
            continue
        words.append(f"{m.reevaluation} {_fmt(m, a)} → {_fmt(m, b)}")
    rec_a, rec_b = recommendation(before), recommendation(after)
    if before is not None and rec_a != rec_b:
        words.append(f"recommendation {rec_a or 'none'} → {rec_b or 'none'}")
    return changes, words


def _show(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _cluster_map(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("name")): c for c in document.get("clusters") or [] if isinstance(c, Mapping)}


def plan_input_changes(before: Mapping[str, Any], after: Mapping[str, Any], limit: int = 6) -> list[str]:
    """Which plan inputs moved, per cluster: ``cluster h100-west gpus 16,384 → 12,288``, ``jobs 12 → 14``."""
    notes: list[str] = []
    a, b = _cluster_map(before), _cluster_map(after)
    for name in sorted(set(a) | set(b)):
        if name not in a:
            notes.append(f"cluster {name} added")
        elif name not in b:
            notes.append(f"cluster {name} removed")
        else:
            for key in sorted(set(a[name]) | set(b[name])):
                if a[name].get(key) != b[name].get(key):
                    x, y = a[name].get(key), b[name].get(key)
                    notes.append(f"cluster {name} {key} {_show(x)} → {_show(y)}")
    for key in ("jobs", "arrivals", "candidates"):
        na, nb = len(before.get(key) or []), len(after.get(key) or [])
        if before.get(key) != after.get(key):
            notes.append(f"{key} {na} → {nb}" if na != nb else f"{key} changed")
    for key in sorted((set(before) | set(after)) - {"clusters", "jobs", "arrivals", "candidates", "name"}):
        if before.get(key) != after.get(key):
            notes.append(f"{key} {before.get(key)} → {after.get(key)}")
    return notes[:limit] + ([f"+{len(notes) - limit} more inputs"] if len(notes) > limit else [])


def _column(run: SimulationRun) -> dict[str, Any]:
    plan = (run.input_snapshot or {}).get("capacity_plan") or {}
    result = run.result or {}
    return {
        "run": run.pk, "plan": plan.get("id"), "plan_name": plan.get("name") or run.label,
        "label": run.label, "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "replications": (result.get("plan") or {}).get("replications"),
        "horizon_days": (result.get("plan") or {}).get("horizon_days"),
        "recommendation": recommendation(result),
        "recommendation_note": (result.get("purchase") or {}).get("note") if isinstance(result.get("purchase"),
                                                                                       Mapping) else None,
    }


def replication_band(result: Mapping[str, Any] | None, metric: metrics.Metric) -> list[float | None] | None:
    """[P10, P90] over the run's replications of a P50 plan figure (its sibling ``.p10`` / ``.p90`` values),
    or None when the result has no such spread."""
    if not metric.path.endswith(".p50"):
        return None
    stem = metric.path[: -len(".p50")]
    low, high = metrics.value(result, f"{stem}.p10"), metrics.value(result, f"{stem}.p90")
    return None if low is None and high is None else [low, high]


def _overlap(bands: Sequence[list[float | None] | None]) -> bool | None:
    """Whether every run's P10-P90 band overlaps every other's (then the P50 difference is within the spread of
    the replications); None when some run has no band."""
    closed = [b for b in bands if b is not None and None not in b]
    if len(closed) != len(bands) or len(closed) < 2:
        return None
    return max(float(b[0]) for b in closed) <= min(float(b[1]) for b in closed)  # type: ignore[arg-type]


def compare_plan_runs(runs: Sequence[SimulationRun]) -> dict[str, Any]:
    """Two to four finished fleet runs side by side: one row per registry plan figure (values per run, the
    change from the first, which run is best), the purchase recommendation of each, and the planner-words
    summary of how the second and later runs differ from the first."""
    if not 2 <= len(runs) <= MAX_COMPARED:
        raise ValidationError({"runs": [f"compare 2 to {MAX_COMPARED} runs"]})
    for r in runs:
        if r.kind != RunKind.FLEET:
            raise ValidationError({"runs": [f"run {r.pk} is not a capacity-plan run"]})
        if r.status != RunStatus.SUCCEEDED or not isinstance(r.result, dict):
            raise ValidationError({"runs": [f"run {r.pk} has no result ({r.status})"]})
    rows = []
    for m in metrics.PLAN:
        vals = [metrics.value(r.result, m) for r in runs]
        if all(v is None for v in vals):
            continue
        best = None
        present = [(v, r.pk) for v, r in zip(vals, runs, strict=True) if v is not None]
        if m.lower_is_better is not None and len(present) > 1 and len({v for v, _ in present}) > 1:
            best = (min if m.lower_is_better else max)(present)[1]
        base = vals[0]
        bands = [replication_band(r.result, m) for r in runs]
        rows.append({"metric": m.path, "key": m.key, "label": m.label, "unit": m.unit, "format": m.format,
                     "lower_is_better": m.lower_is_better, "values": vals, "best_run": best,
                     "delta": [None if v is None or base is None else v - base for v in vals],
                     "bands": bands, "bands_overlap": _overlap(bands)})
    versus = []
    for r in runs[1:]:
        _, words = plan_changes(runs[0].result, r.result)
        versus.append({"run": r.pk, "summary": ", ".join(words) or "no material difference"})
    return {"runs": [_column(r) for r in runs], "metrics": rows, "versus_first": versus}


def latest_plan_run(plan: CapacityPlan) -> SimulationRun:
    """The newest succeeded, unswept run of ``plan`` (what "compare two plans" compares)."""
    run = plan_runs(plan).filter(status=RunStatus.SUCCEEDED, sweep__isnull=True).first()
    if run is None:
        raise ValidationError({"plans": [f"plan {plan.pk} ({plan.name}) has no finished run yet: run it first"]})
    return run
