"""Side-by-side comparison of runs (pandas) and exports as CSV, XLSX and JSON that finance can reconcile.

One function computes the table (:func:`compare_frame`); the API, the portal and every export format read from
it, so their figures always agree. Numbers are never cut to significant figures: money (the metric registry's
kind ``money``) is exact cents, rounded once per line item where the line is read (:func:`cost_statement`), and
every total is the sum of its rounded lines, so the totals row of the line items equals the headline capex,
annual opex and annual TCO to the cent in CSV, XLSX, JSON and on the run page; every other figure keeps full
float precision. A change between runs has one definition (:func:`simulations.metrics.change`): percentage
points for shares (MFU, network wait), percent of the baseline for everything else. Long sources are notes,
listed once each. Text cells beginning with ``= + - @`` (or tab/CR) are prefixed with ``'`` in CSV/XLSX so a
spreadsheet never evaluates them as formulas.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from core.errors import ValidationError
from engine.performance.error_bands import beyond_model_error, difference_error
from simulations import metrics as registry
from simulations.models import Report, RunStatus, SimulationRun
from simulations.reports.statement import cost_statement, run_figures, run_metrics, to_cents, usd
from simulations.results import result_fits

__all__ = ["cost_statement", "run_figures", "run_metrics"]  # the statement's names, read through this module too

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
CONTENT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "json": "application/json",
}
EXPORT_FORMATS = tuple(CONTENT_TYPES)
MAX_COMPARE_RUNS = 50
#: a comparison of at most this many runs names every run in its file name; a larger one names its id
FILE_NAME_RUNS = 6
MONEY_FORMAT = "#,##0.00"


def _ordered_metrics(names: Iterable[str]) -> list[str]:
    """Registry order (headline figures first), then any other numeric leaf of the result alphabetically."""
    return registry.ordered(names)


def run_label(run: SimulationRun) -> str:
    return f"#{run.pk} {run.label or run.kind}".strip()


def _delta(metric: str, base: float, value: float) -> float:
    if registry.kind(metric) == registry.MONEY:
        return usd(to_cents(value) - to_cents(base))  # exact cents, no float noise
    return value - base


def compare_frame(
    *, runs: Sequence[SimulationRun], baseline: SimulationRun, metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    """Metrics as rows, runs as columns (``run:<id>``), plus ``delta:<id>`` (in the metric's unit) and
    ``delta_pct:<id>`` (the change: percentage points for a share, percent of the baseline otherwise) columns for
    every non-baseline run."""
    if baseline.pk not in {r.pk for r in runs}:
        runs = [baseline, *runs]
    data = {f"run:{r.pk}": run_figures(r) for r in runs}
    names = _ordered_metrics({m for values in data.values() for m in values})
    if metrics:
        names = [m for m in metrics if m in set(names)]
    frame = pd.DataFrame(data, index=pd.Index(names, name="metric"), dtype="float64")
    base = frame[f"run:{baseline.pk}"]
    for run in runs:
        if run.pk == baseline.pk:
            continue
        col = frame[f"run:{run.pk}"]
        pairs = list(zip(names, base.tolist(), col.tolist(), strict=True))
        frame[f"delta:{run.pk}"] = [_delta(m, b, v) if not (math.isnan(b) or math.isnan(v)) else math.nan
                                    for m, b, v in pairs]
        frame[f"delta_pct:{run.pk}"] = [_nan(registry.change(m, _num(b), _num(v))) for m, b, v in pairs]
    return frame


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _check_compare(runs: Sequence[SimulationRun], baseline: SimulationRun) -> None:
    if not runs:
        raise ValidationError({"runs": ["give at least one run"]})
    if len(runs) > MAX_COMPARE_RUNS:
        raise ValidationError({"runs": [f"at most {MAX_COMPARE_RUNS} runs per comparison"]})
    not_done = [r.pk for r in [*runs, baseline] if r.status != RunStatus.SUCCEEDED]
    if not_done:
        raise ValidationError({"runs": [f"runs without a result yet: {sorted(set(not_done))}"]})


def _ordered_runs(runs: Sequence[SimulationRun], baseline: SimulationRun) -> list[SimulationRun]:
    return [baseline, *[r for r in runs if r.pk != baseline.pk]]


def comparison_id(runs: Sequence[SimulationRun], baseline: SimulationRun) -> str:
    """A short, stable id of an ad-hoc comparison (its baseline and runs): what its export's file name carries
    when it has too many runs to list."""
    ids = ",".join(str(r.pk) for r in _ordered_runs(runs, baseline))
    return hashlib.sha256(ids.encode()).hexdigest()[:10]


def compare_runs(
    *, runs: Sequence[SimulationRun], baseline: SimulationRun, metrics: Sequence[str] | None = None
) -> dict[str, Any]:
    """The comparison as JSON: run columns, then one row per metric with its label, unit, kind, values and
    changes vs the baseline (``delta`` in the unit; ``delta_pct`` in ``change_unit``: ``pt`` for shares, ``%``
    otherwise)."""
    _check_compare(runs, baseline)
    frame = compare_frame(runs=runs, baseline=baseline, metrics=metrics)
    ordered = _ordered_runs(runs, baseline)
    columns = [
        {"run": r.pk, "label": run_label(r), "kind": r.kind, "scenario": r.scenario_id,
         "engine_version": r.engine_version, "baseline": r.pk == baseline.pk, "fits": run_fits(r)}
        for r in ordered
    ]
    rows = []
    for metric, row in frame.iterrows():
        spec = registry.describe(str(metric))
        rows.append({
            "metric": metric,
            "label": spec.label,
            "unit": spec.unit,
            "kind": registry.kind(str(metric)),
            "change_unit": registry.change_unit(str(metric)),
            "lower_is_better": spec.lower_is_better,
            "values": {str(r.pk): _num(row[f"run:{r.pk}"]) for r in ordered},
            "delta": {str(r.pk): _num(row[f"delta:{r.pk}"]) for r in ordered if r.pk != baseline.pk},
            "delta_pct": {str(r.pk): _num(row[f"delta_pct:{r.pk}"]) for r in ordered if r.pk != baseline.pk},
            # true: the change is larger than the engine's error on differences (error_bands.json "differences")
            "beyond_model_error": {str(r.pk): beyond_model_error(str(metric).rsplit(".", 1)[-1],
                                                                 _num(row[f"run:{baseline.pk}"]), _num(row[f"run:{r.pk}"]))
                                   for r in ordered if r.pk != baseline.pk},
        })
    return {"baseline": baseline.pk, "runs": [r.pk for r in ordered], "comparison_id": comparison_id(runs, baseline),
            "model_error_on_differences": difference_error(), "columns": columns, "rows": rows}


def compare_table(*, runs: Sequence[SimulationRun], baseline: SimulationRun,
                  metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """The export table: metric, label, unit, the unit of the changes, then the baseline's and each run's values,
    each run's change in its unit (``Δ``) and as ``%`` or ``pt`` (``change``)."""
    frame = compare_frame(runs=runs, baseline=baseline, metrics=metrics)
    ordered = _ordered_runs(runs, baseline)
    names = [str(m) for m in frame.index]
    out = pd.DataFrame(index=frame.index)
    out["label"] = [registry.describe(m).label for m in names]
    out["unit"] = [registry.describe(m).unit for m in names]
    out["change_in"] = [registry.change_unit(m) for m in names]
    for r in ordered:
        out[_column(r, baseline)] = frame[f"run:{r.pk}"]
    for r in ordered[1:]:
        out[f"Δ {run_label(r)}"] = frame[f"delta:{r.pk}"]
        out[f"change {run_label(r)}"] = frame[f"delta_pct:{r.pk}"]
    out = plain_frame(out.reset_index())
    if all(run_fits(r) is not False for r in ordered):
        return out
    # does-it-fit first: a run that cannot run says so before any of its figures
    fits: dict[str, Any] = dict.fromkeys(out.columns, "")
    fits.update(metric=FITS_ROW, label="Fits in GPU memory", unit="")
    for r in ordered:
        fits[_column(r, baseline)] = fits_text(r)
    return pd.concat([pd.DataFrame([fits], columns=out.columns), out], ignore_index=True)


def _column(run: SimulationRun, baseline: SimulationRun) -> str:
    return f"{run_label(run)}{' (baseline)' if run.pk == baseline.pk else ''}"


def line_items_frame(*, run: SimulationRun) -> pd.DataFrame:
    """The cost statement as a table: one row per line item, then the totals row."""
    statement = cost_statement(run.result)
    columns = ["category", "item", "quantity", "unit_price_usd", "basis", "capex_usd", "opex_usd_per_year",
               "tco_usd_per_year", "note"]
    if statement is None:
        return pd.DataFrame([], columns=columns)
    rows = [{c: line[c] for c in columns} for line in statement["lines"]]
    rows.append({"category": "total", "item": "Total (one-off capex; opex and TCO per year)", **statement["totals"]})
    return plain_frame(pd.DataFrame(rows, columns=columns))


def notes_frame(*, run: SimulationRun) -> pd.DataFrame:
    statement = cost_statement(run.result)
    return pd.DataFrame(statement["notes"] if statement else [], columns=["note", "source"])


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


def plain_number(value: Any) -> Any:
    """A figure at full precision as a spreadsheet should hold it: whole numbers as integers (256, not 256.0),
    others as the shortest decimal that is the same double (no rounding to significant figures); NaN and
    infinities as empty."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def plain_frame(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.astype(object)
    for col in out.columns:
        values = [plain_number(v) if not (isinstance(v, float) and math.isnan(v)) else None for v in out[col]]
        out[col] = pd.Series(values, index=out.index, dtype=object)  # object: 256 stays 256, not 256.0
    return out


def _money_columns(frame: pd.DataFrame) -> list[str]:
    """Columns that hold amounts of money by their names (``capex_usd``, ``opex_usd_per_year``; not a price such
    as ``usd_per_delivered_gpu_hour``)."""
    return [str(c) for c in frame.columns if str(c).endswith(("_usd", "_usd_per_year"))]


def _sheet(writer: Any, frame: pd.DataFrame, name: str, money: Sequence[str] = (),
           money_rows: Sequence[int] = ()) -> None:
    """One sheet; money columns (and, for a comparison, the money rows) formatted as exact cents."""
    _escaped(frame).to_excel(writer, index=False, sheet_name=name[:31])
    ws = writer.sheets[name[:31]]
    headers = [str(c) for c in frame.columns]
    for col_name in money:
        if col_name in headers:
            col = headers.index(col_name) + 1
            for row in range(2, len(frame) + 2):
                ws.cell(row=row, column=col).number_format = MONEY_FORMAT
    for r in money_rows:
        for col in range(1, len(headers) + 1):
            cell = ws.cell(row=r + 2, column=col)
            if isinstance(cell.value, int | float) and not isinstance(cell.value, bool):
                cell.number_format = MONEY_FORMAT


def _about(meta: Mapping[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"key": escape_cell(str(k)), "value": escape_cell(str(v))} for k, v in meta.items()],
                        columns=["key", "value"])


def frame_bytes(frame: pd.DataFrame, *, fmt: str, sheet: str = "Report", meta: Mapping[str, Any] | None = None,
                money: Sequence[str] | None = None) -> bytes:
    """One table as CSV, XLSX (``sheet`` plus an ``About`` sheet) or JSON (``meta`` plus ``rows``); numbers at
    full precision (:func:`plain_frame`), money columns (default: those named ``*_usd``) as exact cents."""
    frame = plain_frame(frame)
    money_cols = list(money) if money is not None else _money_columns(frame)
    if fmt == "csv":
        return _escaped(frame).to_csv(index=False).encode("utf-8")
    if fmt == "xlsx":
        buf = io.BytesIO()
        with pd.ExcelWriter(buf, engine="openpyxl") as writer:
            _sheet(writer, frame, sheet, money_cols)
            if meta:
                _about(meta).to_excel(writer, index=False, sheet_name="About")
        return buf.getvalue()
    if fmt == "json":
        return _json({**(dict(meta) if meta else {}), "rows": _records(frame)})
    raise ValidationError({"fmt": [f"must be one of {', '.join(EXPORT_FORMATS)}"]})


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): plain_number(v) for k, v in row.items()} for row in plain_frame(frame).to_dict("records")]


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, indent=2, allow_nan=False, default=str).encode("utf-8")


def check_fmt(fmt: str) -> str:
    fmt = (fmt or "").lower()
    if fmt not in EXPORT_FORMATS:
        raise ValidationError({"fmt": [f"must be one of {', '.join(EXPORT_FORMATS)}"]})
    return fmt


def compare_file_name(*, runs: Sequence[SimulationRun], baseline: SimulationRun, report: Report | None = None,
                      sweep_id: int | None = None) -> str:
    """``report-<id>-<name>``, ``sweep-<id>-compare``, ``compare-<every run id>`` (baseline first) when there are at
    most :data:`FILE_NAME_RUNS` runs, else ``compare-<n>-runs-<comparison id>``: never a truncated list of ids."""
    if report is not None:
        return f"report-{report.pk}-{_slug(report.name)}"
    if sweep_id is not None:
        return f"sweep-{sweep_id}-compare"
    ordered = _ordered_runs(runs, baseline)
    if len(ordered) <= FILE_NAME_RUNS:
        return "compare-" + "-".join(str(r.pk) for r in ordered)
    return f"compare-{len(ordered)}-runs-{comparison_id(runs, baseline)}"


def export_compare(
    *, runs: Sequence[SimulationRun], baseline: SimulationRun, fmt: str, name: str = "comparison",
    metrics: Sequence[str] | None = None, report: Report | None = None, sweep_id: int | None = None,
) -> tuple[bytes, str, str]:
    """The comparison as CSV, XLSX (``Comparison`` + ``About``) or JSON (as :func:`compare_runs`):
    ``(bytes, content_type, filename)``."""
    fmt = check_fmt(fmt)
    file_name = compare_file_name(runs=runs, baseline=baseline, report=report, sweep_id=sweep_id)
    data = compare_runs(runs=runs, baseline=baseline, metrics=metrics)  # same validation as the API
    if fmt == "json":
        body = {"name": report.name if report is not None else name, **data,
                "definitions": DEFINITIONS}
        return _json(body), CONTENT_TYPES[fmt], f"{file_name}.json"
    table = compare_table(runs=runs, baseline=baseline, metrics=metrics)
    meta = {"report": report.name if report is not None else name, "comparison_id": data["comparison_id"],
            "baseline_run": baseline.pk, "runs": ", ".join(str(r) for r in data["runs"]), **DEFINITIONS}
    if fmt == "csv":
        return _escaped(table).to_csv(index=False).encode("utf-8"), CONTENT_TYPES[fmt], f"{file_name}.csv"
    money_rows = [i for i, m in enumerate(table["metric"]) if registry.kind(str(m)) == registry.MONEY]
    buf = io.BytesIO()
    with pd.ExcelWriter(buf, engine="openpyxl") as writer:
        _sheet(writer, table, "Comparison", money_rows=money_rows)
        _about(meta).to_excel(writer, index=False, sheet_name="About")
    return buf.getvalue(), CONTENT_TYPES[fmt], f"{file_name}.xlsx"


DEFINITIONS = {
    "money": "exact cents: each line item rounded to the cent where it is read, every total the sum of its lines",
    "change": "percentage points (pt) for shares such as MFU and network wait; percent (%) of the baseline "
              "for everything else",
}


def export_report(*, report: Report, fmt: str) -> tuple[bytes, str, str]:
    """Any saved report as CSV, XLSX or JSON: ``(bytes, content_type, filename)``."""
    runs = list(report.runs.all().order_by("pk"))
    return export_compare(runs=runs, baseline=report.baseline, fmt=fmt, name=report.name,
                          metrics=report.metrics or None, report=report)


def _run_meta(run: SimulationRun) -> dict[str, Any]:
    return {"run": run.pk, "label": run.label, "kind": run.kind, "engine_version": run.engine_version,
            "input_hash": run.input_hash}


def _statement_json(run: SimulationRun) -> dict[str, Any]:
    statement = cost_statement(run.result)
    items = line_items_frame(run=run)
    return {"line_items": _records(items.iloc[:-1]) if len(items) else [],
            "totals": statement["totals"] if statement else None,
            "notes": statement["notes"] if statement else []}


LINE_MONEY = ("capex_usd", "opex_usd_per_year", "tco_usd_per_year")


def export_run_line_items(*, run: SimulationRun, fmt: str) -> tuple[bytes, str, str]:
    """A run's cost line items (TCO runs) with their totals row and notes as CSV (two blocks), XLSX (``Line
    items``, ``Notes``, ``About``) or JSON (``rows``, ``totals``, ``notes``)."""
    fmt = check_fmt(fmt)
    if run.status != RunStatus.SUCCEEDED:
        raise ValidationError({"run": [f"run {run.pk} has no result ({run.status})"]})
    name = f"run-{run.pk}-line-items"
    items, notes = line_items_frame(run=run), notes_frame(run=run)
    if fmt == "json":
        body = _statement_json(run)
        return _json({**_run_meta(run), "rows": body["line_items"], "totals": body["totals"],
                      "notes": body["notes"], "definitions": DEFINITIONS}), CONTENT_TYPES[fmt], f"{name}.json"
    return _blocks(fmt, [("Line items", items, LINE_MONEY), ("Notes", notes, ())], _run_meta(run)), \
        CONTENT_TYPES[fmt], f"{name}.{fmt}"


def _blocks(fmt: str, blocks: Sequence[tuple[str, pd.DataFrame, Sequence[str]]], meta: Mapping[str, Any],
            money_rows: Mapping[str, Sequence[int]] | None = None) -> bytes:
    """CSV: the tables one after the other, a blank line between (empty ones left out); XLSX: a sheet each."""
    if fmt == "csv":
        texts = [_escaped(frame).to_csv(index=False) for _, frame, _ in blocks if len(frame)]
        return "\n".join(texts).encode("utf-8")
    buf = io.BytesIO()
    with pd.ExcelWriter(buf, engine="openpyxl") as writer:
        for sheet, frame, money in blocks:
            _sheet(writer, frame, sheet, money, (money_rows or {}).get(sheet, ()))
        _about(meta).to_excel(writer, index=False, sheet_name="About")
    return buf.getvalue()


def _slug(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_" else "-" for c in name.strip().lower())
    return "-".join(p for p in keep.split("-") if p)[:60] or "report"


# --- the does-not-fit row (#15) and a run's own export ------------------------------------------------------
FITS_ROW = "fits_in_gpu_memory"


def run_fits(run: SimulationRun) -> bool | None:
    """``False`` when the run's result says it does not fit in GPU memory (predict/search top level, tco
    under ``performance``), ``True`` when it fits, None when unknown."""
    return result_fits(run.result)


def fits_text(run: SimulationRun) -> str:
    fits = run_fits(run)
    return "NO: does not fit in GPU memory (not a feasible plan)" if fits is False else "yes" if fits else ""


def run_summary_frame(*, run: SimulationRun) -> pd.DataFrame:
    """A run's figures, does-it-fit first, then every numeric result by dotted path with its label and unit."""
    rows: list[dict[str, Any]] = [{"metric": FITS_ROW, "label": "Fits in GPU memory", "unit": "",
                                   "value": fits_text(run)}]
    figures = run_figures(run)
    for m in _ordered_metrics(figures):
        if m in ("performance.fits", "fits"):
            continue
        spec = registry.describe(m)
        rows.append({"metric": m, "label": spec.label, "unit": spec.unit, "value": plain_number(figures[m])})
    return pd.DataFrame(rows, columns=["metric", "label", "unit", "value"])


def export_run(*, run: SimulationRun, fmt: str) -> tuple[bytes, str, str]:
    """One run: its figures (fits first), its cost line items with the totals row, and the notes. CSV: three
    blocks separated by a blank line; XLSX: a sheet each; JSON: ``metrics``, ``figures``, ``line_items``,
    ``totals``, ``notes``."""
    fmt = check_fmt(fmt)
    if run.status != RunStatus.SUCCEEDED:
        raise ValidationError({"run": [f"run {run.pk} has no result ({run.status})"]})
    summary = run_summary_frame(run=run)
    name = f"run-{run.pk}"
    if fmt == "json":
        records = _records(summary)[1:]
        body = {**_run_meta(run), "fits_in_gpu_memory": run_fits(run),
                "metrics": {r["metric"]: r["value"] for r in records}, "figures": records,
                **_statement_json(run), "definitions": DEFINITIONS}
        return _json(body), CONTENT_TYPES[fmt], f"{name}.json"
    money_rows = [i for i, m in enumerate(summary["metric"]) if registry.kind(str(m)) == registry.MONEY]
    blocks = [("Summary", summary, ()), ("Line items", line_items_frame(run=run), LINE_MONEY),
              ("Notes", notes_frame(run=run), ())]
    return _blocks(fmt, blocks, _run_meta(run), {"Summary": money_rows}), CONTENT_TYPES[fmt], f"{name}.{fmt}"


def quarter_rows(quarters: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """A capacity plan's quarters for export, then a ``total`` row: money in exact cents (results stored before
    the engine kept cents are rounded here), GPU-hours as stored; the total row's money is the sum of the rows'
    cents and its cost per delivered GPU-hour the total TCO over the total GPU-hours delivered."""
    money = [c for c in columns if c.endswith("_usd")]
    rows = [{c: (usd(to_cents(q[c])) if c in money and isinstance(q.get(c), int | float) else q.get(c))
             for c in columns} for q in quarters]
    if not rows:
        return rows
    total: dict[str, Any] = dict.fromkeys(columns)
    total.update(quarter="total", start_day=rows[0].get("start_day"), end_day=rows[-1].get("end_day"))
    for c in columns:
        values = [float(v) for v in (r.get(c) for r in rows) if isinstance(v, int | float) and not isinstance(v, bool)]
        if c in money and values:
            total[c] = usd(sum(to_cents(v) for v in values))
        elif c.startswith("gpu_hours") and values:
            total[c] = math.fsum(values)
    delivered, tco = total.get("gpu_hours_delivered"), total.get("tco_usd")
    if "usd_per_delivered_gpu_hour" in total and delivered and tco is not None:
        total["usd_per_delivered_gpu_hour"] = tco / delivered
    return [*rows, total]
