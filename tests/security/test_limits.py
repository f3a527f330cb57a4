"""Start-up check of the time limits: web budget below the web timeout, a run lease renewed often enough by its
heartbeat (issue #23: the lease no longer has to outlast the hard limit, a live run renews it)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from simulations import limits


def test_defaults_are_consistent() -> None:
    limits.check_limits()
    assert limits.web_engine_budget_s() <= limits.web_timeout_s() / 2
    assert limits.run_time_limit_s() > limits.run_soft_time_limit_s() >= limits.run_budget_s()
    assert limits.run_heartbeat_s() <= limits.run_lease_s() / 3
    assert limits.recovery_bound_s() < 90, "a dead worker's run is re-claimed in well under 90 s"


@pytest.mark.parametrize(
    "overrides,needle",
    [
        ({"FP_RUN_HEARTBEAT_S": 11}, "FP_RUN_HEARTBEAT_S=11"),  # a beat every 11 s cannot keep a 30 s lease safe
        ({"FP_RUN_LEASE_S": 2, "FP_RUN_HEARTBEAT_S": 0.5}, "FP_RUN_LEASE_S=2"),
        ({"FP_REAPER_EVERY_S": 60}, "FP_REAPER_EVERY_S=60"),
        ({"FP_WEB_ENGINE_BUDGET_S": 25}, "FP_WEB_ENGINE_BUDGET_S=25"),
        ({"FP_WEB_ENGINE_BUDGET_S": 0}, "FP_WEB_ENGINE_BUDGET_S=0"),
        ({"FP_RUN_SOFT_TIME_LIMIT_S": 400}, "FP_RUN_SOFT_TIME_LIMIT_S=400"),
        ({"FP_RUN_BUDGET_S": 1000}, "FP_RUN_BUDGET_S=1000"),
    ],
)
def test_inconsistent_limits_are_refused_at_start_up(settings, overrides, needle) -> None:
    for name, value in overrides.items():
        setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured, match=needle):
        limits.check_limits()


def test_run_budget_ends_before_the_soft_limit(settings) -> None:
    settings.FP_RUN_SOFT_TIME_LIMIT_S = 120
    settings.FP_RUN_TIME_LIMIT_S = 150
    del settings.FP_RUN_BUDGET_S  # unset: derived from the soft limit
    assert limits.run_budget_s() == 90
    settings.FP_RUN_SOFT_TIME_LIMIT_S = 8
    assert limits.run_budget_s() == 6  # the margin is at most a quarter of a short soft limit
    limits.check_limits()
