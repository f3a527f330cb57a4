"""Queueing theory: M/M/c with FIFO and no failures against Erlang C; Little's law."""

from __future__ import annotations

import math

import numpy as np

from engine.fleet.core import prepare, simulate_prepared
from tests.engine.fleet._plans import check_little, one_cluster, plan


def erlang_c_wait(c: int, lam: float, mu: float) -> float:
    """Mean wait in queue of M/M/c (Erlang C)."""
    a = lam / mu
    top = a ** c / math.factorial(c) * c / (c - a)
    p_wait = top / (sum(a ** k / math.factorial(k) for k in range(c)) + top)
    return p_wait / (c * mu - lam)


def test_mmc_mean_wait_and_utilization_match_erlang_c() -> None:
    c, load, mean_days = 16, 0.8, 1.0
    lam = load * c / mean_days
    doc = plan(2000, [one_cluster(c)], arrivals=[
        {"name": "poisson", "rate_per_day": lam, "gpus": 1, "duration_days": {"dist": "exponential", "mean": mean_days}}
    ])
    prep = prepare(doc)
    waits, utils = [], []
    for seed in range(6):
        r = simulate_prepared(prep, seed)
        check_little(r)
        waits.append(r["wait_days"]["mean"])
        utils.append(r["utilization"])
    expected = erlang_c_wait(c, lam, 1.0 / mean_days)
    w, se_w = float(np.mean(waits)), float(np.std(waits, ddof=1) / np.sqrt(len(waits)))
    u, se_u = float(np.mean(utils)), float(np.std(utils, ddof=1) / np.sqrt(len(utils)))
    assert abs(w - expected) < 3 * se_w + 0.02 * expected, (w, se_w, expected)
    assert abs(u - load) < 3 * se_u + 0.005, (u, se_u, load)
    # and it is a real queue: the wait is neither zero nor the single-server value
    assert 0.5 * expected < w < 2 * expected


def test_mmc_wait_grows_with_load_as_erlang_c() -> None:
    c = 8
    out = {}
    for load in (0.5, 0.9):
        doc = plan(1500, [one_cluster(c)], arrivals=[
            {"name": "p", "rate_per_day": load * c, "gpus": 1, "duration_days": {"dist": "exponential", "mean": 1.0}}
        ])
        r = simulate_prepared(prepare(doc), 3)
        check_little(r)
        out[load] = r["wait_days"]["mean"]
    ratio = erlang_c_wait(c, 0.9 * c, 1.0) / erlang_c_wait(c, 0.5 * c, 1.0)
    assert out[0.9] / out[0.5] > 0.5 * ratio


def test_littles_law_holds_with_failures_backfill_and_mixed_sizes() -> None:
    doc = plan(120, [one_cluster(512, 8, pod_gpus=128)], policy="backfill", failures={"rate_scale": 50.0}, arrivals=[
        {"name": "mixed", "rate_per_day": 6.0, "gpus": {"dist": "choice", "values": [8, 64, 256], "weights": [5, 3, 1]},
         "duration_days": {"dist": "lognormal", "mean": 2.0, "sigma": 1.0}},
    ])
    for seed in range(3):
        r = simulate_prepared(prepare(doc), seed)
        check_little(r)
        assert r["interruptions"] > 0
        assert r["littles_law"]["queue_length_mean"] > 0
