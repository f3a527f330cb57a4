"""The engine's error band: an 80% interval around each headline figure (issue #22 item 4).

``data/error_bands.json`` is written by ``make validation`` (engine/validation/bands.py fits it on the
leave-one-source-out residuals of the published runs; its "about" states the rule). This module is the one
lookup of that table, used by ``predict`` and ``tco`` and by the validation itself: the regime of a prediction
(its exposed-communication share, its GPU count, its framework) picks the finest cell that has a band.

Per-GPU throughput and everything proportional to it (tokens/s, MFU, TFLOP/s) lies in predicted x [p10, p90]
for 80% of runs like it; durations and costs proportional to the run's length (step time, time-to-train,
GPU-hours, $/run) in predicted / [p90, p10].
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

ERROR_BANDS_PATH = Path(__file__).resolve().parent / "data" / "error_bands.json"

# figures that scale with per-GPU throughput (x band) and those that scale with run time (/ band)
THROUGHPUT_FIGURES = ("tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
                      "mfu", "hfu")
DURATION_FIGURES = ("step_time_s", "time_to_train_days", "gpu_hours",
                    # tco: the run's days and what it costs scale with its length (the cluster's cost per day is
                    # not uncertain in the performance model's error)
                    "run_days", "run_cost_usd", "usd_per_million_tokens")


@lru_cache(maxsize=1)
def shipped_error_bands() -> dict[str, Any]:
    """The shipped table (read once)."""
    table: dict[str, Any] = json.loads(ERROR_BANDS_PATH.read_text(encoding="utf-8"))
    return table


def regime_label(regime: Mapping[str, Any], dimension: Mapping[str, Any]) -> str:
    """The bin label of one dimension for a regime (the rule the table's "about" states)."""
    value = regime.get(dimension["field"])
    if "edges" in dimension:
        return str(dimension["labels"][bisect_right(dimension["edges"], float(value or 0.0))])
    return str(value or "auto")


def regime_cell(regime: Mapping[str, Any], level: Sequence[str], dims: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    by_name = {d["name"]: d for d in dims}
    return {name: regime_label(regime, by_name[name]) for name in level}


def band_entry(regime: Mapping[str, Any], table: Mapping[str, Any]) -> dict[str, Any]:
    """The table entry a regime falls in: its cell at the first level that has a band."""
    for level in table["levels"]:
        want = regime_cell(regime, level, table["dimensions"])
        for entry in table["bands"]:
            if entry["cell"] == want:
                return dict(entry)
    raise ValueError("error band table has no pooled entry (cell {})")


def throughput_band(regime: Mapping[str, Any], table: Mapping[str, Any] | None = None) -> tuple[float, float]:
    """(p10, p90) of measured / predicted per-GPU throughput for runs of this regime (``network_wait_fraction``,
    ``gpus``, ``framework``)."""
    entry = band_entry(regime, table if table is not None else shipped_error_bands())
    return float(entry["p10"]), float(entry["p90"])


def figure_intervals(figures: Mapping[str, float | None], band: tuple[float, float]) -> dict[str, list[float]]:
    """[p10, p90] of every headline figure given: throughput-like x band, duration-like / band (reversed)."""
    lo, hi = band
    out: dict[str, list[float]] = {}
    for key, value in figures.items():
        if value is None:
            continue
        if key in THROUGHPUT_FIGURES:
            out[key] = [value * lo, value * hi]
        elif key in DURATION_FIGURES:
            out[key] = [value / hi, value / lo]
    return out


def difference_error(table: Mapping[str, Any] | None = None) -> float | None:
    """The model's error on differences (|log| of a ratio, 80% of the scaling series' size steps within it), or
    None when the table has none."""
    entry = (table if table is not None else shipped_error_bands()).get("differences") or {}
    value = entry.get("abs_log_error")
    return float(value) if value is not None else None


def beyond_model_error(figure: str, baseline: float | None, value: float | None,
                       table: Mapping[str, Any] | None = None) -> bool | None:
    """Whether ``value`` differs from ``baseline`` by more than the model's error on differences: for a figure
    that scales with per-GPU throughput or with run length (THROUGHPUT_FIGURES, DURATION_FIGURES), |log(value /
    baseline)| > :func:`difference_error`. None where that cannot be said (another figure, a missing or
    non-positive value, no difference band)."""
    if figure not in THROUGHPUT_FIGURES and figure not in DURATION_FIGURES:
        return None
    limit = difference_error(table)
    if limit is None or baseline is None or value is None or baseline <= 0 or value <= 0:
        return None
    return abs(math.log(value / baseline)) > limit
