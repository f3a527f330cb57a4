"""The validation's headline figures as data: what the portal's accuracy page and GET /api/v1/accuracy/ show a planner.

Per set the in-sample and leave-one-source-out error and the 80% bands' coverage, every scaling step, every row, and
whether each accuracy target of issue #22 ("Done when") holds. ``manage.py validation_report`` writes it beside
docs/validation.md from the same :class:`Evaluation`, so the two never disagree; the product reads it as it is
(:func:`load_summary`) and never recomputes the validation in a request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.validation.bands import inside
from engine.validation.evaluate import Evaluation
from engine.validation.rows import ValidationRow, summary, worst_row

SUMMARY_PATH = Path(__file__).resolve().parent / "data" / "accuracy_summary.json"
ALL_SETS = "all"
# Issue #22's targets (held against, never tuned to): leave-one-source-out MAPE over all sets and per set, the LOSO
# coverage of the 80% bands, and each scaling step's predicted per-GPU throughput change within this many points
TARGET_LOSO_MAPE_ALL = 0.08
TARGET_LOSO_MAPE_SET = 0.12
TARGET_COVERAGE = (0.70, 0.90)
SCALING_TARGET_POINTS = 3.0
DIGITS = 4  # fractions kept to 0.01%: the file is read by people and compared in tests


def _r(v: float) -> float:
    return round(float(v), DIGITS)


def _worst(rows: list[ValidationRow]) -> dict[str, Any] | None:
    w = worst_row(rows)
    return None if w is None else {"run": w.run_id, "error": _r(w.error)}


def _set_entry(key: str, title: str, rows: list[ValidationRow], loso: list[ValidationRow],
               coverage: float) -> dict[str, Any]:
    a, b = summary(rows), summary(loso)
    return {"key": key, "title": title, "runs": len(rows), "mape": _r(a["mape"]), "bias": _r(a["bias"]),
            "worst": _worst(rows), "loso_mape": _r(b["mape"]), "loso_bias": _r(b["bias"]), "loso_worst": _worst(loso),
            "coverage": _r(coverage)}


def _targets(sets: list[dict[str, Any]], gaps: list[float]) -> list[dict[str, Any]]:
    overall = next(s for s in sets if s["key"] == ALL_SETS)
    per_set = [s for s in sets if s["key"] != ALL_SETS]
    worst_set = max(per_set, key=lambda s: s["loso_mape"])
    low, high = TARGET_COVERAGE
    within = sum(1 for g in gaps if abs(g) <= SCALING_TARGET_POINTS)
    return [
        {"key": "loso_mape_all", "label": "Leave-one-source-out error, all sets",
         "target": f"<= {TARGET_LOSO_MAPE_ALL:.0%}", "value": overall["loso_mape"],
         "met": overall["loso_mape"] <= TARGET_LOSO_MAPE_ALL},
        {"key": "loso_mape_set", "label": f"Leave-one-source-out error, worst set ({worst_set['title']})",
         "target": f"<= {TARGET_LOSO_MAPE_SET:.0%}", "value": worst_set["loso_mape"],
         "met": worst_set["loso_mape"] <= TARGET_LOSO_MAPE_SET},
        {"key": "coverage", "label": "80% band coverage, leave-one-source-out",
         "target": f"{low:.0%} to {high:.0%}", "value": overall["coverage"],
         "met": low <= overall["coverage"] <= high},
        {"key": "scaling", "label": "Scaling steps within 3 points of the measured change",
         "target": f"{len(gaps)} of {len(gaps)}", "value": within, "met": within == len(gaps)},
    ]


def accuracy_summary(ev: Evaluation) -> dict[str, Any]:
    """The figures of docs/validation.md as one JSON-able document (fractions, not percentages)."""
    sets = [_set_entry(s.run_set.key, s.run_set.title, s.rows, s.loso, ev.coverage(s.run_set.key)) for s in ev.sets]
    sets.append(_set_entry(ALL_SETS, "All sets", [r for s in ev.sets for r in s.rows],
                           [r for s in ev.sets for r in s.loso], ev.coverage()))
    steps = [{"series": s.name, "gpu": s.gpu, "source": s.source, "from_gpus": s.base_gpus, "from_run": s.base_run,
              "to_gpus": p.gpus, "to_run": p.run_id, "measured_change": _r(p.measured_change),
              "predicted_change": _r(p.predicted_change), "gap_points": round(p.gap_points, 1)}
             for s in ev.series for p in s.points]
    rows = []
    residuals = {r.run_id: r for r in ev.residuals}
    for s in ev.sets:
        for run, row, loso in zip(s.runs, s.rows, s.loso, strict=True):
            band = ev.loso_band.get(row.run_id)
            res = residuals.get(row.run_id)
            rows.append({"run": row.run_id, "set": s.run_set.key, "metric": row.metric, "measured": row.measured,
                         "predicted": float(f"{row.predicted:.4g}"), "error": _r(row.error),
                         "loso_error": _r(loso.error), "gpus": row.gpus,
                         "band": [_r(band[0]), _r(band[1])] if band else None,
                         "inside": bool(band and res is not None and inside(res, band)),
                         "source": run.get("source", "")})
    return {
        "about": ("Validation against published training runs (docs/validation.md, written by `make validation`): "
                  "errors are (predicted - measured) / measured in each row's own quantity; LOSO = every constant "
                  "derived from rows refit without the predicted row's source; coverage = share of rows inside the "
                  "80% band fitted without their source; scaling steps = change of per-GPU throughput from a "
                  "series' smallest size, gap = predicted - measured in points (positive: scale under-charged)."),
        "sets": sets,
        "targets": _targets(sets, [p.gap_points for s in ev.series for p in s.points]),
        "scaling_steps": steps,
        "differences": ev.table.get("differences"),
        "rows": rows,
    }


def write_summary(ev: Evaluation, path: Path = SUMMARY_PATH) -> Path:
    path.write_text(json.dumps(accuracy_summary(ev), indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    return path


def load_summary(path: Path = SUMMARY_PATH) -> dict[str, Any]:
    """The shipped summary (empty when ``make validation`` has not written one)."""
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
