"""The fleet event loop honours a run's time budget and cancel cooperatively (issue #11: bounded work)."""

from __future__ import annotations

import pytest

from engine.budget import BudgetExceeded, Cancelled, work_budget
from engine.fleet.core import simulate_fleet
from tests.engine.fleet._plans import one_cluster, plan


def _busy_plan() -> dict:
    # ~200 arrivals a day for a year on 512 single-GPU slots: hundreds of thousands of events.
    return plan(365, [one_cluster(512)],
                arrivals=[{"name": "exp", "rate_per_day": 200.0, "gpus": 1,
                           "duration_days": {"dist": "exponential", "mean": 2.0}}])


def test_budget_stops_the_event_loop() -> None:
    with pytest.raises(BudgetExceeded), work_budget(0.0, what="fleet run"):
        simulate_fleet(_busy_plan(), seed=1)


def test_cancel_stops_the_event_loop() -> None:
    with pytest.raises(Cancelled), work_budget(None, what="fleet run", cancelled=lambda: True, cancel_every_s=0.0):
        simulate_fleet(_busy_plan(), seed=1)


def test_without_a_budget_the_same_plan_finishes() -> None:
    out = simulate_fleet(plan(30, [one_cluster(64)],
                              arrivals=[{"name": "exp", "rate_per_day": 20.0, "gpus": 1,
                                         "duration_days": {"dist": "exponential", "mean": 1.0}}]), seed=1)
    assert out["jobs_completed"] > 0
