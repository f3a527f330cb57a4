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


def test_network_jitter_is_exposed_time_times_cv_times_expected_max() -> None:
    """1 s of exposed collectives over 8 ranks: 1 x 0.029 x E[max Z_8]; Blom: Phi^-1((8-0.375)/8.25) = Phi^-1(0.92424) = 1.4342."""
    from engine.performance.terms.stragglers import NETWORK_CV, network_straggler_time

    assert NETWORK_CV == 0.029
    assert float(network_straggler_time(np.array([1.0]), 8.0)[0]) == pytest.approx(0.029 * 1.4342, rel=1e-3)
    # one rank waits for nobody; more ranks wait longer
    assert float(network_straggler_time(np.array([1.0]), 1.0)[0]) == 0.0
    assert network_straggler_time(np.array([1.0]), 1024.0)[0] > network_straggler_time(np.array([1.0]), 8.0)[0]


def test_a_sweep_gets_each_layouts_own_expected_maximum_in_its_shape() -> None:
    """The inverse CDF is taken once per distinct rank count and spread back: every element equals Blom's value for
    its own count (0 for one rank, counts below one clamp to one), in the array's shape."""
    counts = np.array([[1.0, 8.0, 0.5], [1024.0, 8.0, 2.0]])
    z = expected_max_z(counts)
    assert z.shape == counts.shape
    for got, n in zip(z.ravel(), counts.ravel(), strict=True):
        want = 0.0 if n <= 1.0 else NormalDist().inv_cdf((n - 0.375) / (n + 0.25))
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
