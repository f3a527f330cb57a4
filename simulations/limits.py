"""Time limits of web requests and runs, and the start-up check that keeps them consistent.

Every number here comes from settings (environment variables, see planner/settings.py) with the default in
brackets:

* ``FP_WEB_TIMEOUT_S`` [30] — gunicorn's ``--timeout``: a web worker silent for longer is killed (an HTML 502/500).
* ``FP_WEB_ENGINE_BUDGET_S`` [5] — engine work inside one web request (preview, save-time validation, sweep
  validation); past it the engine's next ``checkpoint()`` raises and the request answers a JSON 503. Must be at
  most half the web timeout, so a request always answers before gunicorn kills it.
* ``FP_RUN_SOFT_TIME_LIMIT_S`` [300] / ``FP_RUN_TIME_LIMIT_S`` [330] — Celery's soft and hard limits of one run.
* ``FP_RUN_BUDGET_S`` [soft − min(30, soft/4)] — the run's cooperative budget, so the engine stops itself cleanly before
  Celery's soft limit interrupts it.
* ``FP_RUN_STUCK_AFTER_S`` [900] — the run lease: a RUNNING run whose heartbeat is older is re-claimed by the
  next delivery or re-queued by the reaper. It must be longer than the hard limit: a live execution cannot
  outlast the hard limit, so it is never claimed a second time while it still works.

:func:`check_limits` runs at start-up (``SimulationsConfig.ready``) in every process — web, worker, beat,
management commands — and refuses an inconsistent configuration with ``ImproperlyConfigured``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

RUN_BUDGET_MARGIN_S = 30.0  # the cooperative budget ends this long (at most a quarter) before the soft limit
HEARTBEAT_EVERY_S = 2.0  # a running engine call renews its lease at most this often (one UPDATE)


def _get(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def web_timeout_s() -> float:
    return _get("FP_WEB_TIMEOUT_S", 30.0)


def web_engine_budget_s() -> float:
    return _get("FP_WEB_ENGINE_BUDGET_S", 5.0)


def run_soft_time_limit_s() -> int:
    return int(_get("FP_RUN_SOFT_TIME_LIMIT_S", 300))


def run_time_limit_s() -> int:
    return int(_get("FP_RUN_TIME_LIMIT_S", 330))


def run_budget_s() -> float:
    soft = run_soft_time_limit_s()
    return _get("FP_RUN_BUDGET_S", soft - min(RUN_BUDGET_MARGIN_S, soft / 4))


def run_lease_s() -> float:
    return _get("FP_RUN_STUCK_AFTER_S", 900.0)


def check_limits() -> None:
    """Refuse limits that would let a request outlive the web timeout or a run be claimed twice."""
    problems = []
    web, budget = web_timeout_s(), web_engine_budget_s()
    if not 0 < budget <= web / 2:
        problems.append(f"FP_WEB_ENGINE_BUDGET_S={budget:g} must be > 0 and at most half of FP_WEB_TIMEOUT_S={web:g}")
    soft, hard, run_budget, lease = run_soft_time_limit_s(), run_time_limit_s(), run_budget_s(), run_lease_s()
    if not 0 < soft < hard:
        problems.append(f"FP_RUN_SOFT_TIME_LIMIT_S={soft} must be > 0 and below FP_RUN_TIME_LIMIT_S={hard}")
    if not 0 < run_budget <= soft:
        problems.append(f"FP_RUN_BUDGET_S={run_budget:g} must be > 0 and at most FP_RUN_SOFT_TIME_LIMIT_S={soft}")
    if not lease > hard + HEARTBEAT_EVERY_S:
        problems.append(
            f"FP_RUN_STUCK_AFTER_S={lease:g} (the run lease) must be longer than the hard time limit "
            f"FP_RUN_TIME_LIMIT_S={hard}: a shorter lease lets a second worker claim a run that is still executing"
        )
    if problems:
        raise ImproperlyConfigured("; ".join(problems))
