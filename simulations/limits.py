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
* ``FP_RUN_LEASE_S`` [30] — the run lease: a RUNNING run whose heartbeat is older is re-claimed by the next
  delivery of its message or re-queued by the reaper. A live execution renews it from a heartbeat thread every
  ``FP_RUN_HEARTBEAT_S`` [lease / 3] (at most a third of the lease, so two lost beats never lapse it), whatever
  the engine is doing, so the lease no longer has to outlast the run: a dead worker's run is re-claimed about
  ``lease + reaper period`` after it died (< 1 minute with the defaults), not after the hard time limit.
* ``FP_RUN_REDISPATCH_AFTER_S`` [45] — a QUEUED run older than this is re-sent by the reaper when the broker
  holds fewer messages than there are queued runs (a flushed or restarted broker lost them).
* ``FP_RUN_STUCK_AFTER_S`` [900] — the backstop: a QUEUED run older than this is re-sent whatever the broker says.
* ``FP_REAPER_EVERY_S`` [15] — how often celery beat runs the reaper (``seed_schedules``); at most 30.

:func:`check_limits` runs at start-up (``SimulationsConfig.ready``) in every process — web, worker, beat,
management commands — and refuses an inconsistent configuration with ``ImproperlyConfigured``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

RUN_BUDGET_MARGIN_S = 30.0  # the cooperative budget ends this long (at most a quarter) before the soft limit
HEARTBEAT_EVERY_S = 2.0  # an engine checkpoint renews the lease (and sees a cancel) at most this often (one UPDATE)
MIN_LEASE_S = 3.0  # shorter leases turn a slow database round trip into a lost claim
MAX_REAPER_EVERY_S = 30


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
    """The lease of a running execution (seconds): re-claimable once its heartbeat is older."""
    return _get("FP_RUN_LEASE_S", 30.0)


def run_heartbeat_s() -> float:
    """How often a running execution's heartbeat thread renews its lease (default: a third of the lease)."""
    return _get("FP_RUN_HEARTBEAT_S", 0.0) or run_lease_s() / 3


def run_redispatch_after_s() -> float:
    """A queued run older than this may have lost its message (re-sent when the broker looks short)."""
    return _get("FP_RUN_REDISPATCH_AFTER_S", 45.0)


def run_stuck_after_s() -> float:
    """A queued run older than this is re-sent whatever the broker's queue length says (the backstop)."""
    return _get("FP_RUN_STUCK_AFTER_S", 900.0)


def reaper_every_s() -> int:
    """The reaper's beat period (seconds)."""
    return int(_get("FP_REAPER_EVERY_S", 15))


def recovery_bound_s() -> float:
    """The longest a dead worker's run waits to be re-claimed: its last heartbeat is at most the death, the lease
    lapses a lease later, the next reaper pass (one period at most) re-queues it, a dispatch hands it over."""
    return run_lease_s() + reaper_every_s() + 2.0


def check_limits() -> None:
    """Refuse limits that would let a request outlive the web timeout or a live run lose its lease."""
    problems = []
    web, budget = web_timeout_s(), web_engine_budget_s()
    if not 0 < budget <= web / 2:
        problems.append(f"FP_WEB_ENGINE_BUDGET_S={budget:g} must be > 0 and at most half of FP_WEB_TIMEOUT_S={web:g}")
    soft, hard, run_budget, lease = run_soft_time_limit_s(), run_time_limit_s(), run_budget_s(), run_lease_s()
    if not 0 < soft < hard:
        problems.append(f"FP_RUN_SOFT_TIME_LIMIT_S={soft} must be > 0 and below FP_RUN_TIME_LIMIT_S={hard}")
    if not 0 < run_budget <= soft:
        problems.append(f"FP_RUN_BUDGET_S={run_budget:g} must be > 0 and at most FP_RUN_SOFT_TIME_LIMIT_S={soft}")
    beat, reaper = run_heartbeat_s(), reaper_every_s()
    if not lease >= MIN_LEASE_S:
        problems.append(f"FP_RUN_LEASE_S={lease:g} (the run lease) must be at least {MIN_LEASE_S:g} s")
    if not 0 < beat <= lease / 3:
        problems.append(
            f"FP_RUN_HEARTBEAT_S={beat:g} must be > 0 and at most a third of FP_RUN_LEASE_S={lease:g}: "
            "a live run must renew its lease several times before it lapses, or a second worker claims it"
        )
    if not 0 < reaper <= MAX_REAPER_EVERY_S:
        problems.append(f"FP_REAPER_EVERY_S={reaper} must be between 1 and {MAX_REAPER_EVERY_S}")
    if problems:
        raise ImproperlyConfigured("; ".join(problems))


# ------------------------------------------------------------------------------ admission (issue #23)
# What a submission may ask of the workers, checked before anything is queued (docs/security.md "Admission"):
#
# * ``FP_MAX_SWEEP_RUNS`` [512] — child runs of one request: a sweep and a capacity plan's replication fan-out
#   share this one limit.
# * ``FP_RUN_MAX_MEMORY_MB`` [2048] — the estimated peak memory of one run (fabric studies: flows x links).
#   Runs are also refused when their estimated time exceeds ``FP_RUN_BUDGET_S`` (above).
# * ``FP_TEAM_MAX_ACTIVE_RUNS`` [512] — runs one team may have queued or running at once (its share of the
#   workers); a submission that would pass it answers 429 with ``Retry-After: FP_ADMISSION_RETRY_AFTER_S`` [60].
# * ``FP_IDEMPOTENCY_TTL_S`` [86400] — how long an ``Idempotency-Key`` of a sweep or replication request is
#   remembered (in the shared cache).


def max_child_runs() -> int:
    """Child runs of one sweep or replication request (``FP_MAX_SWEEP_RUNS``)."""
    return int(_get("FP_MAX_SWEEP_RUNS", 512))


def run_memory_bytes() -> int:
    """The estimated peak memory one run may need (``FP_RUN_MAX_MEMORY_MB``), in bytes."""
    return int(_get("FP_RUN_MAX_MEMORY_MB", 2048) * 1024 * 1024)


def team_max_active_runs() -> int:
    """Runs one team may have queued or running at once (``FP_TEAM_MAX_ACTIVE_RUNS``)."""
    return int(_get("FP_TEAM_MAX_ACTIVE_RUNS", 512))


def admission_retry_after_s() -> int:
    """``Retry-After`` of a submission refused for the team's share (``FP_ADMISSION_RETRY_AFTER_S``)."""
    return int(_get("FP_ADMISSION_RETRY_AFTER_S", 60))


def idempotency_ttl_s() -> int:
    """How long an ``Idempotency-Key`` is remembered (``FP_IDEMPOTENCY_TTL_S``)."""
    return int(_get("FP_IDEMPOTENCY_TTL_S", 86400))
