"""Run lifecycle on the worker side: claim, execute, finish, release, reap — and cancel.

Execution protocol (what makes ``acks_late`` + redelivery safe):

1. ``run_submit`` writes the run row (QUEUED) and enqueues ``simulations.execute_run(run_id)`` with
   ``transaction.on_commit`` — the worker never sees an uncommitted row.
2. ``run_execute`` *claims* the row with one compare-and-set UPDATE: QUEUED, or RUNNING whose heartbeat is
   older than the lease (its worker died). The claim stores a fresh ``claim_token``; 0 rows = someone else
   owns it or it is finished, so a duplicate delivery returns without doing anything.
3. Progress/heartbeat updates are conditional on the claim token; when they match 0 rows the run was
   cancelled or taken over, and the execution stops.
4. The result and the final status are written in ONE conditional UPDATE (status RUNNING + our token):
   exactly one execution can store a result, never half of one.
5. ``run_reap`` (periodic) re-queues runs stuck in QUEUED/RUNNING past ``FP_RUN_STUCK_AFTER_S``.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.errors import ValidationError
from engine.budget import BudgetExceeded, Cancelled, work_budget
from engine.cost.tco import tco
from engine.performance.api import predict, search
from simulations import limits
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun
from simulations.services import dispatch
from simulations.services.advice import gpu_count_advice, is_layout_dead_end
from simulations.services.fabric import compute_fabric
from simulations.services.fleet import compute_fleet
from simulations.services.hashing import jsonable
from simulations.services.reevaluation import reevaluation_complete
from simulations.services.sweeps import sweep_refresh

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = int(os.environ.get("FP_RUN_MAX_ATTEMPTS", "5"))


class TransientError(Exception):
    """Retryable infrastructure failure (the task retries it with backoff)."""


class RunAborted(Exception):
    """The run was cancelled or taken over while this execution was working on it."""


def compute(kind: str, document: dict[str, Any], catalog: dict[str, Any], params: Mapping[str, Any],
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Call the pure engine for one run of ``kind`` and return its result as plain JSON.

    ``progress(done, total)`` is called by engines that work in steps (fabric studies: seeds; capacity plans:
    replications).
    """
    if kind == RunKind.FABRIC:
        return jsonable(compute_fabric(document, catalog, params, progress))
    if kind == RunKind.FLEET:
        return jsonable(compute_fleet(document, catalog, params, progress))
    if kind == RunKind.PREDICT:
        result: Any = predict(document, catalog=catalog)
    elif kind == RunKind.SEARCH:
        result = search(document, top_k=int(params.get("top_k", 5)), catalog=catalog)
    else:
        result = tco(
            document, catalog=catalog, monte_carlo=int(params.get("monte_carlo", 0)),
            sensitivity=bool(params.get("sensitivity", False)), seed=int(params.get("seed", 0)),
        )
    if hasattr(result, "to_dict"):
        result = result.to_dict()
    return jsonable(result)


def _with_way_out(message: str, field: str, run_id: int) -> str:
    """A dead-end layout error gains the planner's way out (nearest GPU counts that work, or N of M + spares)."""
    if not is_layout_dead_end(error=message, field=field):
        return message
    snap = SimulationRun.objects.filter(pk=run_id).values_list("input_snapshot", flat=True).first() or {}
    document = snap.get("document") if isinstance(snap, Mapping) else None
    advice = gpu_count_advice(document=document, catalog=snap.get("catalog_values")) if document else None
    return f"{message}. {advice['message']}" if advice else message


def run_cancel(*, run: SimulationRun, user: Any) -> SimulationRun:
    """Cancel a queued or running run (a running execution notices at its next progress write)."""
    now = timezone.now()
    changed = SimulationRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.CANCELLED, cancel_requested=True, finished_at=now,
        progress_message=f"cancelled by {getattr(user, 'username', 'system')}",
        updated_by=user if getattr(user, "pk", None) else None, updated_at=now,
    )
    run.refresh_from_db()
    if not changed:
        raise ValidationError({"status": [f"run is already {run.status}; only queued or running runs can be cancelled"]})
    if run.sweep_id:
        sweep_refresh(sweep_id=run.sweep_id)
    return run


def _lease_s() -> int:
    return int(getattr(settings, "FP_RUN_STUCK_AFTER_S", 900))


def run_claim(*, run_id: int) -> str | None:
    """Compare-and-set QUEUED (or RUNNING with an expired lease) → RUNNING; returns the claim token."""
    now = timezone.now()
    token = uuid.uuid4().hex
    expired = now - timedelta(seconds=_lease_s())
    claimed = (
        SimulationRun.objects.filter(pk=run_id)
        .filter(Q(status=RunStatus.QUEUED) | Q(status=RunStatus.RUNNING, heartbeat_at__lt=expired))
        .filter(attempts__lt=MAX_ATTEMPTS)
        .update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now, claim_token=token,
                attempts=F("attempts") + 1, progress=1, progress_message="started")
    )
    return token if claimed else None


def _lease_renewer(run_id: int, token: str) -> Callable[[], bool]:
    """Cancel callback of a run's work budget: renews the heartbeat; True once the run is no longer ours."""

    def cancelled() -> bool:
        return not SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
            heartbeat_at=timezone.now()
        )

    return cancelled


def _progress(run_id: int, token: str, progress: int, message: str) -> None:
    n = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
        progress=progress, progress_message=message[:200], heartbeat_at=timezone.now()
    )
    if not n:
        raise RunAborted(run_id)


def _finish(run_id: int, token: str, **fields: Any) -> bool:
    """Write the final status (+ result) in one conditional UPDATE inside a transaction."""
    now = timezone.now()
    with transaction.atomic():
        n = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
            finished_at=now, heartbeat_at=now, updated_at=now, **fields
        )
    return bool(n)


def run_execute(*, run_id: int) -> SimulationRun | None:
    """Claim and execute one run (the body of the Celery task). Safe to call any number of times."""
    token = run_claim(run_id=run_id)
    if token is None:
        return None
    run = SimulationRun.objects.get(pk=run_id)
    try:
        _progress(run_id, token, 5, "checking for an identical stored result")
        if not run.force:
            prior = (
                SimulationRun.objects.filter(
                    team_id=run.team_id, kind=run.kind, input_hash=run.input_hash,
                    engine_version=run.engine_version, status=RunStatus.SUCCEEDED, result__isnull=False,
                )
                .exclude(pk=run.pk)
                .order_by("finished_at", "pk")
                .first()
            )
            if prior is not None:
                _finish(run_id, token, status=RunStatus.SUCCEEDED, result=prior.result, reused_from=prior,
                        progress=100, progress_message=f"identical to run {prior.pk}; stored result reused")
                return _after_finish(run_id)
        _progress(run_id, token, 30, f"running {run.kind}")
        snapshot = run.input_snapshot
        def seeds_done(done: int, total: int) -> None:  # raises RunAborted once the run is cancelled
            unit = "replications" if run.kind == RunKind.FLEET else "seeds"
            _progress(run_id, token, 30 + (60 * done) // max(total, 1), f"{unit} {done}/{total}")

        args = (run.kind, dict(snapshot["document"]), dict(snapshot["catalog_values"]), run.params)
        # stepwise engines report progress (fabric studies: seeds); the others keep the 4-argument call
        # Cooperative budget: the engine's loops call checkpoint(), which stops the run past FP_RUN_BUDGET_S
        # (before Celery's soft limit) or once it was cancelled; each check also renews the lease (heartbeat).
        with work_budget(limits.run_budget_s(), what=f"run {run_id}", cancelled=_lease_renewer(run_id, token),
                         cancel_every_s=limits.HEARTBEAT_EVERY_S):
            stepwise = run.kind in (RunKind.FABRIC, RunKind.FLEET)
            result = compute(*args, progress=seeds_done) if stepwise else compute(*args)
        _progress(run_id, token, 90, "storing result")
        _finish(run_id, token, status=RunStatus.SUCCEEDED, result=result, progress=100,
                progress_message="done", error="", error_field="")
    except (RunAborted, Cancelled):
        logger.info("run %s was cancelled or taken over; stopping", run_id)
        return _after_finish(run_id)
    except BudgetExceeded as exc:
        _finish(run_id, token, status=RunStatus.FAILED, error=f"{exc}; fix some \"auto\" settings or lower "
                "params.monte_carlo", error_field="budget", progress=100, progress_message="failed")
    except TransientError:
        _release(run_id, token)
        raise
    except ValueError as exc:  # engine ScenarioError / CatalogError name the field
        field = str(getattr(exc, "field", "") or "")
        message = str(getattr(exc, "message", "") or exc)
        message = _with_way_out(message, field, run_id)
        _finish(run_id, token, status=RunStatus.FAILED, error=message[:5000], error_field=field[:120],
                progress=100, progress_message="failed")
    except Exception as exc:
        if _is_transient(exc):
            _release(run_id, token)
            raise
        if type(exc).__name__ == "SoftTimeLimitExceeded":
            _finish(run_id, token, status=RunStatus.FAILED, error="time limit exceeded", progress=100,
                    progress_message="failed")
        else:
            logger.exception("run %s failed", run_id)
            _finish(run_id, token, status=RunStatus.FAILED, error=f"internal error: {type(exc).__name__}: {exc}"[:5000],
                    progress=100, progress_message="failed")
    return _after_finish(run_id)


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError | InterfaceError | ConnectionError | TimeoutError)


def _release(run_id: int, token: str) -> None:
    """Give a claimed run back to the queue before a transient-error retry."""
    for attempt in range(2):
        try:
            SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
                status=RunStatus.QUEUED, claim_token="", progress_message="retrying after a transient error",
                heartbeat_at=timezone.now(),
            )
            return
        except Exception:
            # The connection itself may be what broke: drop it so the next query reconnects.
            connection.close()
            if attempt:
                # Still failing: the reaper re-queues the run once its lease expires.
                logger.warning("could not release run %s for retry", run_id, exc_info=True)


def _after_finish(run_id: int) -> SimulationRun:
    run = SimulationRun.objects.get(pk=run_id)
    if run.is_terminal:
        if run.sweep_id:
            sweep_refresh(sweep_id=run.sweep_id)
        if run.trigger == RunTrigger.REEVALUATION:
            reevaluation_complete(run=run)
    return run


def run_reap(*, stuck_after_s: int | None = None) -> dict[str, int]:
    """Re-queue runs stuck in QUEUED/RUNNING longer than the lease (lost message, dead worker)."""
    lease = stuck_after_s if stuck_after_s is not None else _lease_s()
    now = timezone.now()
    cutoff = now - timedelta(seconds=lease)
    counts = {"requeued": 0, "redispatched": 0, "failed": 0}
    # Give up on runs that keep dying.
    counts["failed"] = SimulationRun.objects.filter(
        status__in=ACTIVE_STATUSES, heartbeat_at__lt=cutoff, attempts__gte=MAX_ATTEMPTS
    ).update(status=RunStatus.FAILED, finished_at=now, error=f"gave up after {MAX_ATTEMPTS} attempts",
             progress_message="failed")
    ids: list[int] = []
    for run_id in SimulationRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).values_list("pk", flat=True):
        if SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).update(
            status=RunStatus.QUEUED, claim_token="", heartbeat_at=now, progress_message="re-queued by reaper"
        ):
            counts["requeued"] += 1
            ids.append(run_id)
    for run_id in SimulationRun.objects.filter(status=RunStatus.QUEUED, heartbeat_at__lt=cutoff).values_list("pk", flat=True):
        if SimulationRun.objects.filter(pk=run_id, status=RunStatus.QUEUED, heartbeat_at__lt=cutoff).update(heartbeat_at=now):
            counts["redispatched"] += 1
            ids.append(run_id)
    if ids:
        dispatch.send_execute(ids)
    for sweep_id in set(SimulationRun.objects.filter(pk__in=ids, sweep__isnull=False).values_list("sweep_id", flat=True)):
        sweep_refresh(sweep_id=sweep_id)
    return counts
