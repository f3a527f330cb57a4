"""Start-up check of the time limits: web budget below the web timeout, run lease longer than the hard limit."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from simulations import limits


def test_defaults_are_consistent() -> None:
    limits.check_limits()
    assert limits.web_engine_budget_s() <= limits.web_timeout_s() / 2
    assert limits.run_lease_s() > limits.run_time_limit_s() > limits.run_soft_time_limit_s() >= limits.run_budget_s()


@pytest.mark.parametrize(
    "overrides,needle",
    [
        ({"FP_RUN_STUCK_AFTER_S": 300}, "FP_RUN_STUCK_AFTER_S=300"),  # lease shorter than the hard limit: the probe's bug
        ({"FP_RUN_STUCK_AFTER_S": 330}, "lease"),
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
