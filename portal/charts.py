"""Presentation helpers: pick figures out of stored run results and shape them for templates and charts.

No business rules here: numbers come from the engine results stored on runs and from
``simulations.reports`` (the comparison table and exports); this module only selects, labels and orders.
Chart specs are small JSON documents drawn by ``static/portal/js/charts.js``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.schema.enums import Fabric
from portal import chart_labels
from simulations import metrics as registry
from simulations import reports
from simulations.metrics import dig
from simulations.results import performance_of, result_fits

CATEGORY_LABELS = {
    "gpu_servers": "GPU servers", "network": "Network", "power": "Power", "facility": "Facility",
    "maintenance": "Maintenance", "storage": "Storage", "staff": "Staff",
}

# Headline figures, labels, formats and "better" directions come from the metric registry (simulations.metrics):
# (path, label, format, lower_is_better) for the cards and the comparison table.
HEADLINE_METRICS: list[tuple[str, str, str, bool | None]] = [
    (m.path, m.label, m.format, m.lower_is_better) for m in registry.HEADLINE
]


def _f(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def metric(result: Mapping[str, Any] | None, path: str) -> float | None:
    """A figure of a stored result by path (``performance.mfu`` also finds a predict run's ``mfu``)."""
    return registry.value(result, path)


def cluster_summary(scenario: Any, server_gpus: Mapping[str, Any] | None = None) -> str:
    """``1,024 × H100-SXM · 400G InfiniBand · fat-tree``; a fleet's GPU comes from its server model
    (``server_gpus``: catalog server key → GPU key)."""
    c = dict(scenario.cluster or {})
    if scenario.fleet_id and scenario.fleet is not None:
        f = scenario.fleet
        gpu = (server_gpus or {}).get(f.server_model) or f.server_model
        c = {"gpus": f.gpus, "gpu": gpu, "nic_gbps": f.nic_gbps, "fabric": f.fabric, "topology": f.topology, **c}
    parts = []
    if c.get("gpus"):
        parts.append(f"{int(c['gpus']):,} × {c.get('gpu', 'GPU')}")
    if c.get("nic_gbps"):
        parts.append(f"{int(float(c['nic_gbps']))}G {Fabric.label(c.get('fabric', ''))}")
    if c.get("topology"):
        parts.append(str(c["topology"]))
    return " · ".join(parts)


def estimate(preview: Mapping[str, Any]) -> dict[str, Any]:
    """The live-estimate panel: headline figures and the step-time breakdown as bar segments."""
    breakdown = preview.get("breakdown_s") or {}
    total = sum(v for v in breakdown.values() if isinstance(v, int | float)) or 0.0
    comm = sum(v for k, v in breakdown.items() if k != "compute" and isinstance(v, int | float))
    segments = []
    for i, (key, value) in enumerate(breakdown.items()):
        if isinstance(value, int | float) and total > 0 and value / total >= 0.002:
            segments.append({"key": key, "label": registry.breakdown_label(key), "seconds": value,
                             "share": 100.0 * value / total, "color": SEGMENT_COLORS[i % len(SEGMENT_COLORS)]})
    return {
        "step_time_s": preview.get("step_time_s"), "mfu": preview.get("mfu"),
        "network_wait_fraction": preview.get("network_wait_fraction"),
        "network_wait_s": comm, "run_cost_usd": preview.get("run_cost_usd"),
        "time_to_train_days": preview.get("time_to_train_days"), "tokens_per_s": preview.get("tokens_per_s"),
        "usd_per_gpu_hour": preview.get("usd_per_gpu_hour"), "capex_usd": preview.get("capex_usd"),
        "memory_gb_per_gpu": preview.get("memory_gb_per_gpu"), "fits": preview.get("fits", True),
        "parallelism": preview.get("parallelism") or {}, "segments": segments,
        "cost_error": preview.get("cost_error"), "server_time_ms": preview.get("server_time_ms"),
    }


#: charts.js's palette: a chart dataset's ``color_index`` picks the same colour as a bar segment or legend here
SEGMENT_COLORS = ["#2456d6", "#e07b1a", "#16946b", "#c23b6c", "#7a4ddb", "#0f8fb3", "#b58a00", "#5b6475", "#d9463b",
                  "#3aa34a"]


def run_metrics(run: Any) -> list[dict[str, Any]]:
    """Headline metrics of one run (those present in its result)."""
    out = []
    result = run.result if isinstance(run.result, dict) else {}
    # the model's 80% error band of each figure it covers (engine.performance.error_bands): tco results carry it
    # at the top, predict/search results too; a tco's performance block has its own
    bands = {**(dig(result, "performance.intervals") or {}), **(result.get("intervals") or {})}
    for path, label, fmt, _ in HEADLINE_METRICS:
        value = metric(run.result, path)
        if value is not None:
            band = bands.get(path.rsplit(".", 1)[-1])
            out.append({"path": path, "label": label, "format": fmt, "value": value,
                        "band": band if isinstance(band, list) and len(band) == 2 else None})
    return out


def run_axes(run: Any) -> dict[str, Any]:
    """What a run varied (sweep overrides) or, failing that, its cluster's headline settings."""
    snap = run.input_snapshot or {}
    cluster = dig(snap, "document.cluster") or {}
    return {
        "nic_gbps": _f(cluster.get("nic_gbps")), "fabric": cluster.get("fabric"), "gpu": cluster.get("gpu"),
        "gpus": cluster.get("gpus"), "routing": cluster.get("routing"), "topology": cluster.get("topology"),
        "oversubscription": _f(cluster.get("oversubscription")), "overrides": snap.get("overrides") or {},
    }


# --- comparison table ------------------------------------------------------------------------------------
def comparison_table(runs: Sequence[Any], baseline: Any) -> dict[str, Any]:
    """Headline metrics side by side with deltas vs the baseline (values from ``reports.compare_runs``)."""
    data = reports.compare_runs(runs=list(runs), baseline=baseline)
    by_metric = {row["metric"]: row for row in data["rows"]}
    columns = data["columns"]
    fits_by_run = {r.pk: result_fits(r.result) for r in runs}
    short = chart_labels.short_labels(runs)  # what tells the runs apart, as the charts name them
    for col in columns:
        col["fits"] = fits_by_run.get(col["run"])
        col["short_label"] = short.get(col["run"], "")
    rows = []
    for path, label, fmt, lower_better in HEADLINE_METRICS:
        spec = registry.get(path)
        key = next((p for p in (spec.paths if spec else (path,)) if p in by_metric), None)
        row = by_metric.get(key or "")
        if row is None:
            continue
        cells = []
        for col in columns:
            rid = str(col["run"])
            value = row["values"].get(rid)
            pct = row["delta_pct"].get(rid) if not col["baseline"] else None
            delta = row["delta"].get(rid) if not col["baseline"] else None
            tone = ""
            if pct is not None and lower_better is not None and abs(pct) >= 0.05:
                better = pct < 0 if lower_better else pct > 0
                tone = "delta-good" if better else "delta-bad"
            if fmt == "pct":  # a share moves in percentage points: 5.0% -> 6.8% is +1.8 pt, not +36%
                text = f"{delta * 100:+.1f} pt" if delta is not None else ""
            else:
                text = f"{pct:+.1f}%" if pct is not None else ""
            beyond = row.get("beyond_model_error", {}).get(rid) if not col["baseline"] else None
            if beyond is False:  # within the engine's error on differences: not a difference to act on
                tone = "delta-within"
            cells.append({"value": value, "delta": delta, "delta_pct": pct, "delta_text": text, "tone": tone,
                          "baseline": col["baseline"], "fits": col.get("fits"), "within_error": beyond is False})
        rows.append({"metric": key, "label": label, "format": fmt, "cells": cells})
    nofit = [c["label"] for c in columns if c.get("fits") is False]
    error = data.get("model_error_on_differences")
    return {"columns": columns, "rows": rows, "metric_count": len(data["rows"]), "nofit": nofit,
            "model_error_pct": (math.exp(error) - 1.0) * 100.0 if error is not None else None}


# --- charts ----------------------------------------------------------------------------------------------
#: besides the fabric, what splits the lines when it differs between the runs: (axis, how the label shows it)
SERIES_AXES = (("gpu", "{}"), ("gpus", "{} GPUs"), ("routing", "{}"), ("topology", "{}"),
               ("oversubscription", "{:g}:1"))


def _series_by_fabric(runs: Sequence[Any], path: str) -> dict[str, Any] | None:
    """x = link speed, one line per fabric, split further by GPU, size, routing, topology and oversubscription
    when those differ between the runs (a sweep over them). A run that does not fit in GPU memory is left out:
    a line would show it as an achievable point (its column in the table says why)."""
    points: dict[str, dict[float, float]] = {}
    speeds: set[float] = set()
    axes = [run_axes(r) for r in runs]
    varied = [(k, fmt) for k, fmt in SERIES_AXES if len({ax[k] for ax in axes}) > 1]
    spec = registry.get(path)
    best = min if spec is not None and spec.lower_is_better else max
    for r, ax in zip(runs, axes, strict=True):
        value = metric(r.result, path)
        if ax["nic_gbps"] is None or value is None or result_fits(r.result) is False:
            continue
        name = Fabric.label(ax["fabric"]) if ax["fabric"] else "fabric"
        for key, fmt in varied:  # an unset routing is the fabric's default
            name += " · " + (fmt.format(ax[key]) if ax[key] is not None else ("default" if key == "routing" else "—"))
        speeds.add(ax["nic_gbps"])
        # several runs at the same point (axes not on the chart): keep the best
        prev = points.setdefault(name, {}).get(ax["nic_gbps"])
        points[name][ax["nic_gbps"]] = value if prev is None else best(prev, value)
    if not points:
        return None
    xs = sorted(speeds)
    return {
        "labels": [f"{int(x)}G" for x in xs],
        "datasets": [{"label": name, "data": [pts.get(x) for x in xs], "type": "line"}
                     for name, pts in sorted(points.items())],
    }


#: what a value axis that does not start at zero says, on its title and under the chart (issue #24)
AXIS_CUT = "axis cut: does not start at zero"


def _per_run(spec: dict[str, Any], runs: Sequence[Any], parts: Mapping[int, list[str]]) -> dict[str, Any]:
    """A per-run chart's category labels: the short label (tooltips, the DOM) and its words, one per tick line;
    every tick drawn, none rotated."""
    return {**spec, "labels": [" ".join(parts[r.pk]) for r in runs], "tick_lines": [parts[r.pk] for r in runs],
            "all_ticks": True}


def report_charts(runs: Sequence[Any], baseline: Any = None) -> dict[str, Any]:
    """Chart specs for a set of succeeded runs (keys are the json_script ids). Runs are named by their short
    labels (:mod:`portal.chart_labels`); value axes start at zero unless the spec says ``axis_cut``; the
    sensitivity tornado is the baseline's (the first run's when no baseline is given)."""
    runs = [r for r in runs if r.result]
    if baseline is None and runs:
        baseline = runs[0]
    parts = chart_labels.label_parts(runs, baseline)
    charts: dict[str, Any] = {}

    mfu = _series_by_fabric(runs, "performance.mfu")
    if mfu:
        charts["chart-mfu"] = {"title": "MFU vs link speed", "type": "line", "format": "pct", "all_ticks": True,
                               "x_title": "Link speed per GPU", "y_title": "MFU", **mfu}
    ttt = _series_by_fabric(runs, "performance.time_to_train_days")
    if ttt:
        charts["chart-ttt"] = {"title": "Time to train vs link speed", "type": "line", "format": "days",
                               "all_ticks": True, "x_title": "Link speed per GPU", "y_title": "Days", **ttt}

    cats: list[str] = []
    per_run: list[dict[str, float]] = []
    for r in runs:
        totals: dict[str, float] = {}
        for item in dig(r.result, "tco.line_items") or []:
            cat = item.get("category") or "other"
            value = _f(item.get("annual_usd"))
            if value is None:
                continue
            totals[cat] = totals.get(cat, 0.0) + value
            if cat not in cats:
                cats.append(cat)
        per_run.append(totals)
    if cats:
        order = [c for c in CATEGORY_LABELS if c in cats] + [c for c in cats if c not in CATEGORY_LABELS]
        charts["chart-tco"] = _per_run({
            "title": "Annual TCO by category", "type": "bar", "stacked": True, "format": "usd",
            "y_title": "US$ per year",
            "datasets": [{"label": CATEGORY_LABELS.get(c, c), "data": [t.get(c, 0.0) for t in per_run], "stack": "tco"}
                         for c in order],
        }, runs, parts)

    keys: list[str] = []
    for r in runs:
        for k in (performance_of(r.result).get("breakdown_s") or {}):
            if k not in keys:
                keys.append(k)
    if keys:
        charts["chart-step"] = _per_run({
            "title": "Step-time breakdown", "type": "bar", "stacked": True, "format": "s", "y_title": "Seconds per step",
            "datasets": [{"label": registry.breakdown_label(k),
                          "data": [_f((performance_of(r.result).get("breakdown_s") or {}).get(k)) or 0.0 for r in runs],
                          "stack": "step"} for k in keys],
        }, runs, parts)

    mc_runs = [r for r in runs if isinstance(r.result.get("monte_carlo"), Mapping)]
    if mc_runs:
        for key, title, fmt in (("run_cost_usd", "$ per run: P10–P90 band and P50", "usd"),
                                ("time_to_train_days", "Time to train: P10–P90 band and P50", "days")):
            bands = [dig(r.result, f"monte_carlo.{key}") or {} for r in mc_runs]
            if not any(bands):
                continue
            charts[f"chart-mc-{key.split('_')[0]}"] = _per_run({
                "title": title, "type": "bar", "format": fmt,
                "datasets": [
                    {"label": "P10–P90", "data": [[_f(b.get("p10")), _f(b.get("p90"))] for b in bands], "overlap": True},
                    {"label": "P50", "data": [_f(b.get("p50")) for b in bands], "type": "line", "color_index": 1},
                ],
            }, mc_runs, parts)

    tornado = _tornado(baseline, parts) if baseline is not None and baseline in runs else None
    if tornado:
        charts["chart-tornado"] = tornado
    return charts


def _tornado(run: Any, parts: Mapping[int, list[str]]) -> dict[str, Any] | None:
    """The baseline's one-at-a-time sensitivity of $ per run, its inputs named by the metric registry. The bars
    start at the base $ per run, so the value axis is cut, and says so."""
    rows = [s for s in (run.result.get("sensitivity") or []) if isinstance(s, Mapping)][:10]
    if not rows:
        return None
    base = metric(run.result, "tco.run_cost_usd") or 0.0
    return {
        "title": f"Sensitivity of $ per run ({' '.join(parts[run.pk])})", "type": "bar", "horizontal": True,
        "format": "usd", "x_title": "$ per run", "begin_at_zero": False, "axis_cut": AXIS_CUT, "all_ticks": True,
        "labels": [registry.input_label(str(s.get("input", ""))) for s in rows],
        "datasets": [
            {"label": "Input at low value", "data": [[base, _f(s.get("run_cost_low_usd"))] for s in rows],
             "overlap": True, "color_index": 2},
            {"label": "Input at high value", "data": [[base, _f(s.get("run_cost_high_usd"))] for s in rows],
             "overlap": True, "color_index": 3},
        ],
    }


def step_breakdown(run: Any) -> dict[str, Any] | None:
    """A run's step time by term: a one-bar horizontal stacked chart with each part labelled on the bar, and the
    table beside it (term, seconds, share); every label from ``simulations.metrics.BREAKDOWN``, the colours of
    the table's keys those of the bar's parts. Terms at zero are named once below the table, not drawn."""
    result = getattr(run, "result", None)
    if result_fits(result) is False:  # an impossible configuration has no step time to break down
        return None
    breakdown = performance_of(result).get("breakdown_s") or {}
    terms = [(k, v) for k, v in ((k, _f(v)) for k, v in breakdown.items()) if v is not None]
    total = sum(v for _, v in terms if v > 0)
    if total <= 0:
        return None
    rows = [{"key": k, "label": registry.breakdown_label(k), "seconds": v, "share": v / total,
             "color": SEGMENT_COLORS[i % len(SEGMENT_COLORS)]}
            for i, (k, v) in enumerate((k, v) for k, v in terms if v > 0)]
    spec = {
        "title": "Step-time breakdown", "type": "bar", "horizontal": True, "stacked": True, "format": "s",
        "x_title": "Seconds per step", "labels": ["Step"], "segment_labels": True, "legend": False,
        "datasets": [{"label": row["label"], "data": [row["seconds"]], "stack": "step", "color_index": i}
                     for i, row in enumerate(rows)],
    }
    zero = [registry.breakdown_label(k) for k, v in terms if v <= 0]
    return {"rows": rows, "total_s": total, "zero_terms": zero, "spec": spec}


# --- re-evaluations --------------------------------------------------------------------------------------
# A re-evaluation shows the headline metrics that moved first (either path of each), then the largest other moves.
REEVAL_HEADLINES = [(p, m.label, m.format) for m in registry.HEADLINE for p in m.paths]


def reevaluation_changes(changes: Mapping[str, Any] | None, limit: int = 8) -> list[dict[str, Any]]:
    """Headline metric moves of a re-evaluation first, then the largest other relative moves."""
    changes = changes or {}
    rows, seen = [], set()
    for path, label, fmt in REEVAL_HEADLINES:
        c = changes.get(path)
        if isinstance(c, Mapping) and label not in seen:
            seen.add(label)
            rows.append({"metric": path, "label": label, "format": fmt, **c})
    others = sorted(
        ((p, c) for p, c in changes.items() if isinstance(c, Mapping) and p not in {r["metric"] for r in rows}),
        key=lambda pc: -abs(pc[1].get("delta_pct") or 0.0),
    )
    for path, c in others[: max(0, limit - len(rows))]:
        rows.append({"metric": path, "label": metric_label(path), "format": metric_format(path), **c})
    for row in rows:
        if row["format"] == "pct" and isinstance(row.get("delta"), int | float):
            row["change_text"] = f"{row['delta'] * 100:+.1f} pt"
        elif isinstance(row.get("delta_pct"), int | float):
            row["change_text"] = f"{row['delta_pct']:+.1f}%"
        else:
            row["change_text"] = "—"
    return rows




def metric_label(path: str) -> str:
    """A readable name for a result path (headline label, else the last parts of the path in words)."""
    spec = registry.get(path)
    if spec is not None:
        return spec.label
    words = path.replace("tco.", "").replace("performance.", "").replace("_", " ").replace(".", " · ")
    for unit in (" usd", " s", " gb"):
        if words.endswith(unit):
            words = words[: -len(unit)]
    return words[:1].upper() + words[1:]


def metric_format(path: str) -> str:
    """How to print a result path when it is not a headline metric: by its unit suffix."""
    spec = registry.get(path)
    if spec is not None:
        return spec.format
    leaf = path.rsplit(".", 1)[-1]
    if "usd" in leaf:
        return "usd2" if "per_gpu_hour" in leaf or "per_kwh" in leaf else "usd"
    if leaf.endswith(("fraction", "share", "mfu", "hfu")) or "share_of" in leaf or leaf.startswith("share"):
        return "pct"
    if leaf.endswith("_days"):
        return "days"
    if leaf.endswith("_s"):
        return "s"
    if leaf.endswith("_gb") or "_gb_" in leaf:
        return "gb"
    if leaf.endswith("_kw"):
        return "kw"
    return "num"


def accuracy_charts(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Chart specs of the accuracy page (keys are the json_script ids): each set's error in-sample and
    leave-one-source-out, and each scaling step's per-GPU throughput change, measured against predicted."""
    charts: dict[str, Any] = {}
    sets = list(summary.get("sets") or [])
    if sets:
        charts["chart-set-errors"] = {
            "title": "Mean error per set", "type": "bar", "format": "pct", "y_title": "Mean absolute error",
            "labels": [s["title"] for s in sets], "all_ticks": True,
            "tick_lines": [str(s["title"]).split(" (")[0].split() for s in sets],
            "datasets": [{"label": "In-sample", "data": [s["mape"] for s in sets]},
                         {"label": "Leave-one-source-out", "data": [s["loso_mape"] for s in sets]}],
        }
    steps = list(summary.get("scaling_steps") or [])
    if steps:
        names = [f"{st['series'].split(' (')[0]} {st['from_gpus']:,}→{st['to_gpus']:,}" for st in steps]
        charts["chart-scaling"] = {
            "title": "Per-GPU throughput change as the job grows", "type": "bar", "format": "pct",
            "y_title": "Change from the smallest size", "labels": names, "all_ticks": True,
            "tick_lines": [[st["series"].split(" (")[0].split(",")[0], f"{st['from_gpus']:,}→{st['to_gpus']:,}"]
                           for st in steps],
            "datasets": [{"label": "Measured", "data": [st["measured_change"] for st in steps]},
                         {"label": "Predicted (leave-one-source-out)", "data": [st["predicted_change"] for st in steps]}],
        }
    return charts
