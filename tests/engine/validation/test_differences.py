"""The model's error on differences (issue #22 item 4): measured on the scaling series, used by comparisons."""

from __future__ import annotations

import math

import pytest

from engine.performance.error_bands import beyond_model_error, difference_error
from engine.validation.scaling import ScalingPoint, ScalingSeries, change_errors, difference_band


def _series(pairs: list[tuple[float, float]]) -> list[ScalingSeries]:
    points = tuple(ScalingPoint(f"r{i}", 100 * (i + 2), measured, predicted)
                   for i, (measured, predicted) in enumerate(pairs))
    return [ScalingSeries("m", "src", "H100", "r-base", 100, points)]


def test_change_error_is_the_log_of_predicted_over_measured_change() -> None:
    # measured -20%, predicted -10%: (0.9 / 0.8) -> log 1.125
    assert change_errors(_series([(-0.2, -0.1)])) == [pytest.approx(math.log(0.9 / 0.8))]


def test_difference_band_is_the_80th_percentile_of_absolute_change_errors() -> None:
    # |log| errors 0.0, 0.1, 0.2, 0.3, 0.4, 0.5 (exact by construction); 80th percentile with linear
    # interpolation between order statistics: position 0.8 x 5 = 4 -> 0.4
    pairs = [(0.0, math.exp(e) - 1.0) for e in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)]
    band = difference_band(_series(pairs))
    assert band["steps"] == 6
    assert band["abs_log_error"] == pytest.approx(0.4, abs=1e-6)
    assert band["ratio"] == pytest.approx(math.exp(0.4), abs=1e-5)
    assert difference_band([]) == {}


def test_beyond_model_error_by_figure_kind() -> None:
    table = {"differences": {"abs_log_error": 0.1}}
    assert difference_error(table) == 0.1
    assert beyond_model_error("mfu", 0.40, 0.45, table) is True  # log 1.125 = 0.118
    assert beyond_model_error("mfu", 0.40, 0.42, table) is False  # log 1.05 = 0.049
    assert beyond_model_error("step_time_s", 10.0, 8.0, table) is True  # durations too: |log 0.8| = 0.223
    assert beyond_model_error("capex_usd", 1e6, 2e6, table) is None  # a bill of materials, not a prediction
    assert beyond_model_error("mfu", None, 0.4, table) is None
    assert beyond_model_error("mfu", 0.4, 0.5, {}) is None


def test_the_shipped_table_carries_the_difference_band() -> None:
    value = difference_error()
    assert value is not None and 0.0 < value < 1.0
