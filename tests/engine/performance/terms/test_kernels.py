"""Kernel times (terms/kernels.py): the smooth GEMM roofline and memory-bound passes."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.terms.kernels import gemm_time, hbm_time, launches
from tests.engine.performance._build import build, dense_doc


def test_a_large_square_gemm_runs_at_the_sustained_rate() -> None:
    """8192^3 bf16 on H100: 2 x 8192^3 / (989 TFLOP/s x 0.52) x sqrt(1 + (R/I)^2) + 3 us, I = 8192/3 FLOP/B."""
    ctx, _, _ = build(dense_doc())
    n = 8192.0
    rate = 989e12 * 0.52
    intensity = 2 * n**3 / (2 * 3 * n * n)
    ridge = rate / ctx.gpu.hbm_bw
    expected = 2 * n**3 / rate * np.sqrt(1 + (ridge / intensity) ** 2) + 3e-6
    assert gemm_time(ctx, np.array([n]), np.array([n]), np.array([n]))[0] == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(2 * n**3 / rate, rel=0.01)  # compute bound: within 1% of the rate


def test_a_thin_gemm_is_bandwidth_bound() -> None:
    """M = 1 token: bytes dominate, time -> bytes / HBM bandwidth (the roofline's slanted side)."""
    ctx, _, _ = build(dense_doc())
    k = n = 8192.0
    t = gemm_time(ctx, np.array([1.0]), np.array([k]), np.array([n]))[0] - 3e-6
    assert t == pytest.approx(2.0 * k * n / ctx.gpu.hbm_bw, rel=1e-3)


def test_count_scales_the_kernel_and_its_launch() -> None:
    ctx, _, _ = build(dense_doc())
    one = gemm_time(ctx, np.array([64.0]), np.array([64.0]), np.array([64.0]))[0]
    assert gemm_time(ctx, np.array([64.0]), np.array([64.0]), np.array([64.0]), count=4.0)[0] == pytest.approx(4 * one)


def test_memory_bound_pass_runs_at_80_percent_of_hbm_and_a_launch_costs_3_us() -> None:
    ctx, _, _ = build(dense_doc())
    assert hbm_time(ctx, np.array([3.35e12]))[0] == pytest.approx(3.35e12 / (0.8 * 3.35e12), rel=1e-12)
    assert launches(6.0) == pytest.approx(18e-6)
