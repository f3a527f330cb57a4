"""Celery tasks: thin wrappers that load ids and call services (the services hold all the logic).

Tasks take ids, never model instances. ``execute_run`` is safe to deliver more than once (the service
claims the row with a compare-and-set), which is what makes ``acks_late`` + ``reject_on_worker_lost``
(settings) safe: a job whose worker was SIGKILLed simply runs again.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.core.cache import cache
from django.db import InterfaceError, OperationalError

from simulations import limits, services

logger = logging.getLogger(__name__)

TRANSIENT = (OperationalError, InterfaceError, ConnectionError, TimeoutError, services.TransientError)
# From settings (FP_RUN_SOFT_TIME_LIMIT_S / FP_RUN_TIME_LIMIT_S). A live run keeps its (short) lease from a
# heartbeat thread whatever its time limit (simulations.services.leases), so it is never claimed twice; a dead
# worker's run is re-claimed once the lease lapses (simulations.limits.recovery_bound_s).
RUN_SOFT_TIME_LIMIT_S = limits.run_soft_time_limit_s()
RUN_TIME_LIMIT_S = limits.run_time_limit_s()


@shared_task(
    name="simulations.execute_run",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=TRANSIENT,
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=5,
    soft_time_limit=RUN_SOFT_TIME_LIMIT_S,
    time_limit=RUN_TIME_LIMIT_S,
)
def execute_run(self: Any, run_id: int) -> dict[str, Any]:
    run = services.run_execute(run_id=run_id)
    if run is None:
        return {"run": run_id, "claimed": False}
    return {"run": run_id, "claimed": True, "status": run.status}


@shared_task(name="simulations.finalize_sweep", acks_late=True, autoretry_for=TRANSIENT, retry_backoff=2,
             max_retries=5)
def finalize_sweep(_results: Any = None, sweep_id: int | None = None) -> dict[str, Any]:
    """Chord callback. The last child to finish also refreshes the sweep, so this is a second opinion."""
    if sweep_id is None:
        return {}
    sweep = services.sweep_refresh(sweep_id=sweep_id)
    return {"sweep": sweep_id, "status": sweep.status}


@shared_task(name="simulations.reap_stuck_runs", acks_late=True, autoretry_for=TRANSIENT, retry_backoff=2,
             max_retries=3, expires=2 * limits.reaper_every_s())
def reap_stuck_runs() -> dict[str, int]:
    """Beat, every FP_REAPER_EVERY_S: re-queue runs whose lease lapsed, re-send runs whose message was lost."""
    return services.run_reap()


REEVALUATION_LOCK = "fp:reevaluate-watched:lock"


@shared_task(name="simulations.reevaluate_watched", acks_late=True, autoretry_for=TRANSIENT, retry_backoff=5,
             max_retries=3, expires=3000)
def reevaluate_watched() -> dict[str, Any]:
    """Beat task. A cache lock keeps two beats from overlapping; the unique idempotency key on each
    re-evaluation makes a second pass over the same change a no-op even without the lock."""
    if not cache.add(REEVALUATION_LOCK, "1", timeout=600):
        return {"skipped": "another re-evaluation pass is running"}
    try:
        created = services.reevaluate_watched()
    finally:
        cache.delete(REEVALUATION_LOCK)
    return {"reevaluations": [r.pk for r in created]}


@shared_task(name="simulations.deliver_webhook", bind=True, acks_late=True, autoretry_for=(services.WebhookError,),
             retry_backoff=10, retry_backoff_max=3600, retry_jitter=True, max_retries=8)
def deliver_webhook(self: Any, reevaluation_id: int) -> bool:
    """Celery retries a retryable failure (network, 5xx, 429) with exponential backoff from 10 s up to an
    hour; the last attempt records the failure on the re-evaluation instead of raising."""
    try:
        return services.webhook_deliver(reevaluation_id=reevaluation_id)
    except services.WebhookError as exc:
        if self.request.retries >= self.max_retries:
            services.webhook_give_up(reevaluation_id=reevaluation_id, error=str(exc))
            return False
        raise
