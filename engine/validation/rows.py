"""One validation row: a published run predicted by the engine and compared like with like.

The run's ``measured`` key names the quantity (hardware or model TFLOP/s per GPU, MFU, step time, tokens/s per
GPU or GPU-hours); the row keeps the prediction of that same quantity, the layout the engine used and the
regime the error bands are conditioned on (exposed-communication share, GPU count, framework).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import CatalogItems
from engine.performance.api import predict
from engine.performance.result import Result
from engine.validation.runs import COMPARABLE, TIME_LIKE, load_runs, source_key


@dataclass(frozen=True)
class ValidationRow:
    run_id: str
    source: str
    metric: str
    measured: float
    predicted: float
    parallelism: dict[str, Any]
    fits: bool
    mfu: float
    gpus: int = 0
    network_wait_fraction: float = 0.0  # Result.network_wait_fraction: exposed communication / step
    framework: str = "auto"  # the scenario's training.framework ("auto" when it names none)
    tokens_per_s_per_gpu: float = 0.0  # predicted
    step_shares: dict[str, float] = field(default_factory=dict)  # each breakdown_s term / the predicted step

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured, in the row's own quantity."""
        return (self.predicted - self.measured) / self.measured

    @property
    def throughput_ratio(self) -> float:
        """Measured / predicted per-GPU throughput: above 1 when the run went faster than predicted (a
        step-time or GPU-hours row is inverted, so every row reads the same way)."""
        if self.metric in TIME_LIKE:
            return self.predicted / self.measured
        return self.measured / self.predicted

    @property
    def residual(self) -> float:
        """log(measured / predicted) per-GPU throughput: the quantity the error bands are fitted on."""
        return math.log(self.throughput_ratio)

    @property
    def optimism(self) -> float:
        """Predicted / measured per-GPU throughput - 1: positive when the engine predicts the run faster
        than it went (the sign of the bias column, whatever quantity the row compares)."""
        return 1.0 / self.throughput_ratio - 1.0

    @property
    def source_key(self) -> str:
        return source_key(self.source)

    @property
    def regime(self) -> dict[str, Any]:
        """The values the error bands are conditioned on (engine.validation.bands)."""
        return {"network_wait_fraction": self.network_wait_fraction, "gpus": self.gpus,
                "framework": self.framework}


def _figure(result: Result, key: str) -> float:
    """A predicted figure to compare with the measured one. A run that ran but that the engine says does not fit
    (a memory false negative, flagged by ``fits``) is still compared on what it would reach with the memory it
    had: no row is dropped."""
    value = getattr(result, key) if result.fits else (result.unconstrained or {}).get(key)
    return float(value) if value is not None else float("nan")


def _step_shares(result: Result) -> dict[str, float]:
    """Each term of the predicted step as a share of it (``breakdown_s`` / ``step_time_s``; for a memory false
    negative, of what it would reach with the memory it had, as :func:`_figure`)."""
    figures: dict[str, Any] = ({"breakdown_s": result.breakdown_s, "step_time_s": result.step_time_s} if result.fits
                               else dict(result.unconstrained or {}))
    terms: dict[str, float] = figures.get("breakdown_s") or {}
    step = figures.get("step_time_s")
    if not step:
        return {}
    return {k: float(v) / float(step) for k, v in terms.items()}


def validation_rows(runs: list[dict[str, Any]] | None = None, catalog: CatalogItems | None = None) -> list[ValidationRow]:
    rows: list[ValidationRow] = []
    for run in runs if runs is not None else load_runs():
        measured: dict[str, float] = run["measured"]
        metric = next(k for k in COMPARABLE if k in measured)
        result = predict(run["scenario"], catalog=catalog)
        rows.append(
            ValidationRow(
                run_id=run["id"],
                source=run.get("source", ""),
                metric=metric,
                measured=float(measured[metric]),
                predicted=_figure(result, metric),
                parallelism=result.parallelism,
                fits=result.fits,
                mfu=_figure(result, "mfu"),
                gpus=int(result.gpus),
                network_wait_fraction=_figure(result, "network_wait_fraction"),
                framework=str(run["scenario"].get("training", {}).get("framework") or "auto"),
                tokens_per_s_per_gpu=_figure(result, "tokens_per_s_per_gpu"),
                step_shares=_step_shares(result),
            )
        )
    return rows


def summary(rows: Sequence[ValidationRow]) -> dict[str, float]:
    """rows, MAPE and worst absolute error in each row's own quantity; bias = mean signed optimism
    (predicted / measured per-GPU throughput - 1, positive = predicted faster). Every row counts."""
    errors = [abs(r.error) for r in rows]
    return {
        "rows": float(len(rows)),
        "mape": sum(errors) / len(errors) if errors else 0.0,
        "worst": max(errors) if errors else 0.0,
        "bias": sum(r.optimism for r in rows) / len(rows) if rows else 0.0,
    }


def worst_row(rows: Iterable[ValidationRow]) -> ValidationRow | None:
    """The row with the largest absolute error (None for no rows)."""
    return max(rows, key=lambda r: abs(r.error), default=None)
