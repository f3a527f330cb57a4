"""Stragglers (terms/stragglers.py): compute x 0.8% x E[max of n normals] by Blom's approximation."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from engine.performance.terms.stragglers import expected_max_z, straggler_time


@pytest.mark.parametrize("n", [2, 8, 1024, 16384])
def test_expected_maximum_is_bloms(n: int) -> None:
    assert expected_max_z(float(n))[()] == pytest.approx(NormalDist().inv_cdf((n - 0.375) / (n + 0.25)), rel=1e-12)


def test_straggler_time_is_cv_times_the_expected_maximum() -> None:
    z = NormalDist().inv_cdf((1024 - 0.375) / (1024 + 0.25))
    assert straggler_time(np.array([10.0]), 1024.0)[0] == pytest.approx(10.0 * 0.008 * z, rel=1e-12)
    assert straggler_time(np.array([10.0]), 1.0)[0] == 0.0
