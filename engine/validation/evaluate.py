"""One pass over every validation set: in-sample rows, leave-one-source-out rows, error bands, coverage and
scaling series, computed once and read by the report (report.py), the band file and the plot."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import CatalogItems
from engine.validation.bands import Residual, coverage, fit_bands, loso_bands, residuals_of
from engine.validation.loso import loso_rows
from engine.validation.registry import ROW_DERIVED_CONSTANTS, RowDerivedConstant, refit_hooks
from engine.validation.rows import ValidationRow, validation_rows
from engine.validation.runs import RUN_SETS, RunSet, load_runs
from engine.validation.scaling import ScalingSeries, difference_band, scaling_series

RunProgress = Callable[[list[dict[str, Any]]], Iterable[dict[str, Any]]]


@dataclass
class SetResult:
    run_set: RunSet
    runs: list[dict[str, Any]]
    rows: list[ValidationRow]  # in-sample
    loso: list[ValidationRow]  # leave-one-source-out (same order)


@dataclass
class Evaluation:
    sets: list[SetResult]
    constants: Sequence[RowDerivedConstant]
    residuals: list[Residual]  # LOSO residuals of every row, every set
    loso_band: dict[str, tuple[float, float]]  # each row's band, fitted without the row's source
    table: dict[str, Any]  # the bands fitted on every row (error_bands.json)
    series: list[ScalingSeries] = field(default_factory=list)
    refits: dict[str, dict[str, float]] = field(default_factory=dict)  # held-out source -> constant -> value

    @property
    def refit(self) -> bool:
        """Whether any constant is refit leave-one-source-out (else LOSO rows are the in-sample rows)."""
        return bool(refit_hooks(self.constants))

    def set_result(self, key: str) -> SetResult | None:
        return next((s for s in self.sets if s.run_set.key == key), None)

    def residuals_of_set(self, key: str) -> list[Residual]:
        result = self.set_result(key)
        ids = {r.run_id for r in result.loso} if result else set()
        return [r for r in self.residuals if r.run_id in ids]

    def coverage(self, key: str | None = None) -> float:
        """LOSO coverage of the 80% bands: one set's rows, or every row (``key`` None)."""
        res = self.residuals if key is None else self.residuals_of_set(key)
        return coverage(res, self.loso_band)

    def sources(self) -> list[dict[str, Any]]:
        """Each source of the rows: the sets it appears in, its row count and how the rows cite it."""
        out: dict[str, dict[str, Any]] = {}
        for s in self.sets:
            for run, row in zip(s.runs, s.rows, strict=True):
                entry = out.setdefault(row.source_key, {"source": row.source_key, "sets": [], "runs": 0,
                                                        "cited_as": []})
                entry["runs"] += 1
                if s.run_set.key not in entry["sets"]:
                    entry["sets"].append(s.run_set.key)
                if run.get("source", "") not in entry["cited_as"]:
                    entry["cited_as"].append(run.get("source", ""))
        return sorted(out.values(), key=lambda e: e["source"])


def _predict(runs: list[dict[str, Any]], catalog: CatalogItems | None, progress: RunProgress | None) -> list[ValidationRow]:
    rows: list[ValidationRow] = []
    for run in progress(runs) if progress is not None else runs:
        rows.extend(validation_rows([run], catalog=catalog))
    return rows


def evaluate_sets(run_sets: Sequence[RunSet] = RUN_SETS, catalog: CatalogItems | None = None,
             constants: Sequence[RowDerivedConstant] = ROW_DERIVED_CONSTANTS,
             progress: RunProgress | None = None) -> Evaluation:
    """Predict every run of every set (``progress`` may wrap the run list, e.g. with tqdm) and derive the rest."""
    loaded = [(rs, load_runs(rs.path)) for rs in run_sets if rs.path.exists()]
    all_runs = [run for _, runs in loaded for run in runs]
    in_sample = _predict(all_runs, catalog, progress)
    refits: dict[str, dict[str, float]] = {}
    loso = loso_rows(all_runs, in_sample, constants,
                     predict_rows=lambda runs: validation_rows(runs, catalog=catalog), refits=refits)
    sets, start = [], 0
    for rs, runs in loaded:
        end = start + len(runs)
        sets.append(SetResult(rs, runs, in_sample[start:end], loso[start:end]))
        start = end
    residuals = residuals_of(loso)
    series = scaling_series(all_runs, loso)
    table = fit_bands(residuals)
    differences = difference_band(series)
    if differences:
        table["differences"] = differences
    return Evaluation(sets=sets, constants=constants, residuals=residuals, loso_band=loso_bands(residuals),
                      table=table, series=series, refits=refits)
