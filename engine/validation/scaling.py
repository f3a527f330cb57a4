"""Scaling series: one model measured at several cluster sizes by one source, measured against predicted.

A series is the rows (of any set) that share the source (runs.source_key), the GPU type and the scenario less
what changes with the cluster size: ``cluster.gpus``, the parallel degrees, ``training.global_batch``,
``micro_batch`` and ``tokens``. For each larger size the measured and the predicted change of per-GPU
throughput from the smallest size, in percent, and their gap in points: a predicted change above the measured
one (a smaller predicted loss per GPU) means the engine under-charges scale.

Measured per-GPU throughput is predicted tokens/s per GPU times the row's measured / predicted throughput
ratio (``ValidationRow.throughput_ratio``), so rows that measured different quantities compare.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.validation.rows import ValidationRow
from engine.validation.runs import source_key

SIZE_FIELDS = {"cluster": ("gpus",), "training": ("global_batch", "micro_batch", "tokens")}


@dataclass(frozen=True)
class ScalingPoint:
    run_id: str
    gpus: int
    measured_change: float  # per-GPU throughput / that of the smallest size - 1
    predicted_change: float
    # each predicted step term's share of the step at this size less its share at the smallest size, in points
    share_changes: dict[str, float] = field(default_factory=dict)

    @property
    def gap_points(self) -> float:
        """Predicted - measured change, in percentage points (positive: scale under-charged)."""
        return (self.predicted_change - self.measured_change) * 100.0


@dataclass(frozen=True)
class ScalingSeries:
    name: str  # the model name of the scenario
    source: str  # runs.source_key
    gpu: str
    base_run: str
    base_gpus: int
    points: tuple[ScalingPoint, ...]  # the larger sizes, smallest first


def series_key(run: dict[str, Any]) -> str:
    """What the rows of one series share (source, GPU type, scenario less its size)."""
    sc = json.loads(json.dumps(run["scenario"]))
    sc.pop("parallelism", None)
    for section, keys in SIZE_FIELDS.items():
        for k in keys:
            sc.get(section, {}).pop(k, None)
    return json.dumps({"source": source_key(run.get("source", "")), "scenario": sc}, sort_keys=True)


def scaling_series(runs: Sequence[dict[str, Any]], rows: Sequence[ValidationRow]) -> list[ScalingSeries]:
    """Series of two or more sizes among ``runs`` (``rows``: their predictions, same order), ordered by
    source, model and GPU type."""
    groups: dict[str, list[tuple[dict[str, Any], ValidationRow]]] = {}
    for run, row in zip(runs, rows, strict=True):
        groups.setdefault(series_key(run), []).append((run, row))
    out = []
    for members in groups.values():
        if len({row.gpus for _, row in members}) < 2:
            continue
        members.sort(key=lambda m: m[1].gpus)
        base_run, base = members[0]
        m0 = base.tokens_per_s_per_gpu * base.throughput_ratio
        p0 = base.tokens_per_s_per_gpu
        points = tuple(
            ScalingPoint(row.run_id, row.gpus, row.tokens_per_s_per_gpu * row.throughput_ratio / m0 - 1.0,
                         row.tokens_per_s_per_gpu / p0 - 1.0, share_changes(base, row))
            for _, row in members[1:] if row.gpus > base.gpus
        )
        out.append(ScalingSeries(str(base_run["scenario"]["model"].get("name", base.run_id)), base.source_key,
                                 str(base_run["scenario"]["cluster"]["gpu"]), base.run_id, base.gpus, points))
    return sorted(out, key=lambda s: (s.source, s.name, s.gpu))


def share_changes(base: ValidationRow, row: ValidationRow) -> dict[str, float]:
    """Where the predicted step went between two sizes: each term's share of the step at ``row`` less its share
    at ``base``, in percentage points (positive: that term takes more of the larger job's step)."""
    keys = set(base.step_shares) | set(row.step_shares)
    return {k: (row.step_shares.get(k, 0.0) - base.step_shares.get(k, 0.0)) * 100.0 for k in sorted(keys)}


DIFFERENCE_COVERAGE = 0.8  # the share of the steps' change errors the difference band holds


def change_errors(series: Sequence[ScalingSeries]) -> list[float]:
    """log(predicted / measured) of each size step's per-GPU throughput change: the engine's error on a
    difference between two scenarios of one model (0: it predicted the change exactly)."""
    return [math.log((1.0 + p.predicted_change) / (1.0 + p.measured_change)) for s in series for p in s.points]


def difference_band(series: Sequence[ScalingSeries]) -> dict[str, Any]:
    """The error on differences for error_bands.json: the 80th percentile of |change error| over the scaling
    steps (linear interpolation between order statistics), as a ratio: two predictions whose per-GPU throughput
    (or duration) differ by more than that factor differ by more than the model's error on differences."""
    errors = [abs(e) for e in change_errors(series)]
    if not errors:
        return {}
    q = float(np.quantile(errors, DIFFERENCE_COVERAGE))  # numpy's default: linear between order statistics
    return {"coverage": DIFFERENCE_COVERAGE, "steps": len(errors), "abs_log_error": round(q, 6),
            "ratio": round(math.exp(q), 6),
            "about": "80th percentile of |log(predicted change / measured change)| of per-GPU throughput over the "
                     "size steps of the scaling series (engine/validation/scaling.py); a comparison marks a change "
                     "as beyond the model's error when |log(value / baseline)| exceeds abs_log_error"}
