"""Side-by-side comparison of runs (pandas) and exports as CSV, XLSX and JSON.

One function computes the table (:func:`compare_frame`); the API, the portal and every export format
read from it, so their figures always agree. Text cells beginning with ``= + - @`` (or tab/CR) are
prefixed with ``'`` in CSV/XLSX so a spreadsheet never evaluates them as formulas.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from core.errors import ValidationError
from simulations import metrics as registry
from simulations.models import Report, RunStatus, SimulationRun

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
CONTENT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "json": "application/json",
}
EXPORT_FORMATS = tuple(CONTENT_TYPES)
MAX_COMPARE_RUNS = 50


def _flatten(node: Any, prefix: str = "", out: dict[str, float] | None = None, depth: int = 0) -> dict[str, float]:
    out = {} if out is None else out
    if depth > 5:
        return out
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("line_items", "alternatives", "sensitivity", "samples"):
                continue
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), out, depth + 1)
    elif isinstance(node, bool) or (isinstance(node, int | float) and math.isfinite(float(node))):
        out[prefix] = float(node)
    return out


def run_metrics(run: SimulationRun | None) -> dict[str, float]:
    """Every numeric scalar of a run's result, by dotted path (lists such as line items excluded)."""
    if run is None or not run.result:
        return {}
    return _flatten(run.result)


def _ordered_metrics(names: Iterable[str]) -> list[str]:
    """Registry order (headline figures first), then any other numeric leaf of the result alphabetically."""
    return registry.ordered(names)


def run_label(run: SimulationRun) -> str:
    return f"#{run.pk} {run.label or run.kind}".strip()


def compare_frame(
    *, runs: Sequence[SimulationRun], baseline: SimulationRun, metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    """Metrics as rows, runs as columns (``run:<id>``), plus ``delta:<id>`` and ``delta_pct:<id>``
    columns for every non-baseline run."""
    if baseline.pk not in {r.pk for r in runs}:
        runs = [baseline, *runs]
    data = {f"run:{r.pk}": run_metrics(r) for r in runs}
    names = _ordered_metrics({m for values in data.values() for m in values})
    if metrics:
        names = [m for m in metrics if m in set(names)]
    frame = pd.DataFrame(data, index=pd.Index(names, name="metric"), dtype="float64")
    base = frame[f"run:{baseline.pk}"]
    for run in runs:
        if run.pk == baseline.pk:
            continue
        col = frame[f"run:{run.pk}"]
        frame[f"delta:{run.pk}"] = col - base
        frame[f"delta_pct:{run.pk}"] = (col - base) / base.abs().where(base != 0) * 100.0
    return frame


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def compare_runs(
    *, runs: Sequence[SimulationRun], baseline: SimulationRun, metrics: Sequence[str] | None = None
) -> dict[str, Any]:
    """The comparison as JSON: run columns, then one row per metric with values and deltas vs baseline."""
    if not runs:
        raise ValidationError({"runs": ["give at least one run"]})
    if len(runs) > MAX_COMPARE_RUNS:
        raise ValidationError({"runs": [f"at most {MAX_COMPARE_RUNS} runs per comparison"]})
    not_done = [r.pk for r in [*runs, baseline] if r.status != RunStatus.SUCCEEDED]
    if not_done:
        raise ValidationError({"runs": [f"runs without a result yet: {sorted(set(not_done))}"]})
    frame = compare_frame(runs=runs, baseline=baseline, metrics=metrics)
    ordered = [baseline, *[r for r in runs if r.pk != baseline.pk]]
    columns = [
        {"run": r.pk, "label": run_label(r), "kind": r.kind, "scenario": r.scenario_id,
         "engine_version": r.engine_version, "baseline": r.pk == baseline.pk, "fits": run_fits(r)}
        for r in ordered
    ]
    rows = []
    for metric, row in frame.iterrows():
        spec = registry.get(str(metric))
        rows.append({
            "metric": metric,
            "label": spec.label if spec else str(metric),
            "unit": spec.unit if spec else "",
            "lower_is_better": spec.lower_is_better if spec else None,
            "values": {str(r.pk): _num(row[f"run:{r.pk}"]) for r in ordered},
            "delta": {str(r.pk): _num(row[f"delta:{r.pk}"]) for r in ordered if r.pk != baseline.pk},
            "delta_pct": {str(r.pk): _num(row[f"delta_pct:{r.pk}"]) for r in ordered if r.pk != baseline.pk},
        })
    return {"baseline": baseline.pk, "runs": [r.pk for r in ordered], "columns": columns, "rows": rows}


def compare_table(*, runs: Sequence[SimulationRun], baseline: SimulationRun,
                  metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """The export table: human column headers, baseline first, deltas after each run."""
    frame = compare_frame(runs=runs, baseline=baseline, metrics=metrics)
    ordered = [baseline, *[r for r in runs if r.pk != baseline.pk]]
    out = pd.DataFrame(index=frame.index)
    for r in ordered:
        out[f"{run_label(r)}{' (baseline)' if r.pk == baseline.pk else ''}"] = frame[f"run:{r.pk}"]
        if r.pk != baseline.pk:
            out[f"Δ {run_label(r)}"] = frame[f"delta:{r.pk}"]
            out[f"Δ% {run_label(r)}"] = frame[f"delta_pct:{r.pk}"]
    out["label"] = [registry.label(str(m)) for m in out.index]
    out["unit"] = [registry.unit(str(m)) for m in out.index]
    out = tidy_frame(out.reset_index())
    if all(run_fits(r) is not False for r in ordered):
        return out
    # does-it-fit first: a run that cannot run says so before any of its figures
    fits: dict[str, Any] = dict.fromkeys(out.columns, "")
    fits["metric"] = FITS_ROW
    for r in ordered:
        fits[f"{run_label(r)}{' (baseline)' if r.pk == baseline.pk else ''}"] = fits_text(r)
    return pd.concat([pd.DataFrame([fits], columns=out.columns), out], ignore_index=True)


def line_items_frame(*, run: SimulationRun) -> pd.DataFrame:
    items = ((run.result or {}).get("tco") or {}).get("line_items") or []
    columns = ["category", "item", "quantity", "unit_price_usd", "total_usd", "annual_usd", "source"]
    return pd.DataFrame([{c: i.get(c) for c in columns} for i in items], columns=columns)


# --- export ------------------------------------------------------------------------------------------
def escape_cell(value: Any) -> Any:
    """Neutralise spreadsheet formulas in text cells (CSV/XLSX injection)."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _escaped(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out.columns = [escape_cell(str(c)) for c in out.columns]
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            # keep object dtype: .map() would re-infer float64 and print a whole 256 as "256.0"
            out[col] = pd.Series([escape_cell(v) for v in out[col]], index=out.index, dtype=object)
    return out


def frame_bytes(frame: pd.DataFrame, *, fmt: str, sheet: str = "Report", meta: Mapping[str, Any] | None = None) -> bytes:
    if fmt == "csv":
        return _escaped(frame).to_csv(index=False).encode("utf-8")
    if fmt == "xlsx":
        buf = io.BytesIO()
        with pd.ExcelWriter(buf, engine="openpyxl") as writer:
            _escaped(frame).to_excel(writer, index=False, sheet_name=sheet[:31])
            if meta:
                pd.DataFrame([{"key": escape_cell(str(k)), "value": escape_cell(str(v))} for k, v in meta.items()]).to_excel(
                    writer, index=False, sheet_name="About"
                )
        return buf.getvalue()
    if fmt == "json":
        records = json.loads(frame.to_json(orient="records"))
        return json.dumps({**(dict(meta) if meta else {}), "rows": records}, indent=2).encode("utf-8")
    raise ValidationError({"fmt": [f"must be one of {', '.join(EXPORT_FORMATS)}"]})


def _check_fmt(fmt: str) -> str:
    fmt = (fmt or "").lower()
    if fmt not in EXPORT_FORMATS:
        raise ValidationError({"fmt": [f"must be one of {', '.join(EXPORT_FORMATS)}"]})
    return fmt


def export_compare(
    *, runs: Sequence[SimulationRun], baseline: SimulationRun, fmt: str, name: str = "comparison",
    metrics: Sequence[str] | None = None,
) -> tuple[bytes, str, str]:
    fmt = _check_fmt(fmt)
    if fmt == "json":
        body = json.dumps({"name": name, **compare_runs(runs=runs, baseline=baseline, metrics=metrics)}, indent=2)
        return body.encode("utf-8"), CONTENT_TYPES[fmt], f"{_slug(name)}.json"
    compare_runs(runs=runs, baseline=baseline, metrics=metrics)  # same validation as the API
    table = compare_table(runs=runs, baseline=baseline, metrics=metrics)
    meta = {"report": name, "baseline_run": baseline.pk, "runs": ", ".join(str(r.pk) for r in runs)}
    return frame_bytes(table, fmt=fmt, sheet="Comparison", meta=meta), CONTENT_TYPES[fmt], f"{_slug(name)}.{fmt}"


def export_report(*, report: Report, fmt: str) -> tuple[bytes, str, str]:
    """Any saved report as CSV, XLSX or JSON: ``(bytes, content_type, filename)``."""
    runs = list(report.runs.all().order_by("pk"))
    return export_compare(runs=runs, baseline=report.baseline, fmt=fmt, name=report.name,
                          metrics=report.metrics or None)


def export_run_line_items(*, run: SimulationRun, fmt: str) -> tuple[bytes, str, str]:
    """A run's cost line items (TCO runs) as CSV, XLSX or JSON."""
    fmt = _check_fmt(fmt)
    if run.status != RunStatus.SUCCEEDED:
        raise ValidationError({"run": [f"run {run.pk} has no result ({run.status})"]})
    frame = tidy_frame(line_items_frame(run=run))
    meta = {"run": run.pk, "label": run.label, "kind": run.kind, "engine_version": run.engine_version,
            "input_hash": run.input_hash}
    return frame_bytes(frame, fmt=fmt, sheet="Line items", meta=meta), CONTENT_TYPES[fmt], f"run-{run.pk}-line-items.{fmt}"


def _slug(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_" else "-" for c in name.strip().lower())
    return "-".join(p for p in keep.split("-") if p)[:60] or "report"


# --- tidy numbers and the does-not-fit row (#15) ---------------------------------------------------------
SIGNIFICANT_DIGITS = 6
FITS_ROW = "fits_in_gpu_memory"


def tidy_number(value: Any) -> Any:
    """A figure as a person would write it in a spreadsheet: 6 significant digits, whole numbers without
    ``.0`` (17.202394102789956 -> 17.2024, 256.0 -> 256); other values pass through."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return None
    if value == 0:
        return 0
    digits = SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, digits)
    return int(rounded) if float(rounded).is_integer() and abs(rounded) < 1e15 else rounded


def tidy_frame(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.astype(object)
    for col in out.columns:
        values = [tidy_number(v) if not (isinstance(v, float) and math.isnan(v)) else None for v in out[col]]
        out[col] = pd.Series(values, index=out.index, dtype=object)  # object: 256 stays 256, not 256.0
    return out


def run_fits(run: SimulationRun) -> bool | None:
    """``False`` when the run's result says it does not fit in GPU memory (predict/search top level, tco
    under ``performance``), ``True`` when it fits, None when unknown."""
    result: Mapping[str, Any] = run.result if isinstance(run.result, Mapping) else {}
    section = result.get("performance")
    perf: Mapping[str, Any] = section if isinstance(section, Mapping) else result
    fits = perf.get("fits")
    return fits if isinstance(fits, bool) else None


def fits_text(run: SimulationRun) -> str:
    fits = run_fits(run)
    return "NO: does not fit in GPU memory (not a feasible plan)" if fits is False else "yes" if fits else ""


def run_summary_frame(*, run: SimulationRun) -> pd.DataFrame:
    """A run's figures, does-it-fit first, then every numeric result by dotted path."""
    rows: list[dict[str, Any]] = [{"metric": FITS_ROW, "value": fits_text(run)}]
    metrics = run_metrics(run)
    rows += [{"metric": m, "value": tidy_number(metrics[m])} for m in _ordered_metrics(metrics) if m != "performance.fits"
             and m != "fits"]
    return pd.DataFrame(rows, columns=["metric", "value"])


def export_run(*, run: SimulationRun, fmt: str) -> tuple[bytes, str, str]:
    """One run: its figures (fits first) and its cost line items. CSV: two blocks separated by a blank line;
    XLSX: a sheet each; JSON: ``{"metrics": {...}, "line_items": [...]}``."""
    fmt = _check_fmt(fmt)
    if run.status != RunStatus.SUCCEEDED:
        raise ValidationError({"run": [f"run {run.pk} has no result ({run.status})"]})
    summary = run_summary_frame(run=run)
    items = tidy_frame(line_items_frame(run=run))
    meta = {"run": run.pk, "label": run.label, "kind": run.kind, "engine_version": run.engine_version,
            "input_hash": run.input_hash}
    name = f"run-{run.pk}"
    if fmt == "json":
        body = {**meta, "fits_in_gpu_memory": run_fits(run),
                "metrics": {r["metric"]: r["value"] for r in summary.to_dict("records")[1:]},
                "line_items": json.loads(items.to_json(orient="records"))}
        return json.dumps(body, indent=2).encode("utf-8"), CONTENT_TYPES[fmt], f"{name}.json"
    if fmt == "csv":
        text = _escaped(summary).to_csv(index=False)
        if len(items):
            text += "\n" + _escaped(items).to_csv(index=False)
        return text.encode("utf-8"), CONTENT_TYPES[fmt], f"{name}.csv"
    buf = io.BytesIO()
    with pd.ExcelWriter(buf, engine="openpyxl") as writer:
        _escaped(summary).to_excel(writer, index=False, sheet_name="Summary")
        _escaped(items).to_excel(writer, index=False, sheet_name="Line items")
        pd.DataFrame([{"key": escape_cell(str(k)), "value": escape_cell(str(v))} for k, v in meta.items()]).to_excel(
            writer, index=False, sheet_name="About")
    return buf.getvalue(), CONTENT_TYPES[fmt], f"{name}.xlsx"
