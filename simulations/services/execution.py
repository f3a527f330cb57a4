"""Run lifecycle on the worker side: claim, execute, finish, release, reap — and cancel.

Execution protocol (what makes ``acks_late`` + redelivery safe):

1. ``run_submit`` writes the run row (QUEUED) and enqueues ``simulations.execute_run(run_id)`` with
   ``transaction.on_commit`` — the worker never sees an uncommitted row.
2. ``run_execute`` *claims* the row with one compare-and-set UPDATE on the state it read (status, claim token,
   attempts): QUEUED, or RUNNING whose lease lapsed (its heartbeat is older than ``FP_RUN_LEASE_S``: its worker
   died). The claim stores a fresh ``claim_token``; 0 rows = someone else owns it or it is finished, so a
   duplicate delivery returns without doing anything. Two executions never hold one claim.
3. While it works, the execution's heartbeat (``leases.Heartbeat``: a daemon thread every ``FP_RUN_HEARTBEAT_S``
   plus the engine's checkpoints) renews the lease with an UPDATE conditional on the claim token; progress
   writes are conditional on it too. When one matches 0 rows the run was cancelled or taken over, and the
   execution stops at its next checkpoint or progress write.
4. The result and the final status are written in ONE conditional UPDATE (status RUNNING + our token), together
   with a job's own writes (a calibration profile, an imported file's summary) in the same transaction: exactly
   one execution can store a result, never half of one.
5. ``run_reap`` (beat, every ``FP_REAPER_EVERY_S``) re-queues RUNNING runs whose lease lapsed and re-sends QUEUED
   runs whose message the broker lost. Every claim, lapse, re-send and end is a ``RunEvent``.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.errors import ValidationError
from engine.budget import BudgetExceeded, Cancelled, work_budget
from engine.cost.tco import tco
from engine.performance.api import predict, search
from simulations import limits
from simulations.models import (
    ACTIVE_STATUSES,
    JobKind,
    RunEvent,
    RunKind,
    RunStatus,
    RunTrigger,
    SimulationRun,
)
from simulations.services import calibration, dispatch
from simulations.services.advice import gpu_count_advice, is_layout_dead_end, with_sizing_note
from simulations.services.fabric import compute_fabric
from simulations.services.fleet import compute_fleet
from simulations.services.hashing import jsonable
from simulations.services.leases import Heartbeat, heartbeat_for, lease_lapsed, record_event
from simulations.services.params import budget_hint
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
    result = with_sizing_note(kind=kind, document=document, catalog=catalog, result=result)  # awkward sizes
    return jsonable(result)


def _with_way_out(message: str, field: str, run_id: int, code: str = "") -> str:
    """A dead-end layout error (decided by the engine's code, else its field) gains the planner's way out
    (nearest GPU counts that work, or N of M + spares)."""
    if not is_layout_dead_end(field=field, code=code):
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
    if run.kind in JobKind.values:
        calibration.job_ended(run=run)
    return run


def run_claim(*, run_id: int, now: datetime | None = None, lease_s: float | None = None) -> str | None:
    """Compare-and-set QUEUED (or RUNNING with a lapsed lease) → RUNNING; returns the new claim token.

    The UPDATE names the state read just before (status, claim token, attempts) and, for a RUNNING row, that its
    lease is still lapsed: of two claimers racing, one matches and the other finds 0 rows.
    """
    now = now or timezone.now()
    lease = lease_s if lease_s is not None else limits.run_lease_s()
    seen = SimulationRun.objects.filter(pk=run_id).values("status", "claim_token", "attempts", "heartbeat_at").first()
    if seen is None or seen["attempts"] >= MAX_ATTEMPTS:
        return None
    taking_over = seen["status"] == RunStatus.RUNNING
    if not (seen["status"] == RunStatus.QUEUED
            or (taking_over and lease_lapsed(seen["heartbeat_at"], now=now, lease_s=lease))):
        return None
    token = uuid.uuid4().hex
    rows = SimulationRun.objects.filter(pk=run_id, status=seen["status"], claim_token=seen["claim_token"],
                                        attempts=seen["attempts"])
    if taking_over:
        rows = rows.filter(heartbeat_at__lt=now - timedelta(seconds=lease))
    claimed = rows.update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now, claim_token=token,
                          attempts=F("attempts") + 1, progress=1, progress_message="started")
    if not claimed:
        return None
    note = "the previous execution's lease lapsed" if taking_over else ""
    record_event(run_id, RunEvent.Kind.CLAIMED, attempt=seen["attempts"] + 1, message=note, at=now)
    return token


def _progress(run_id: int, token: str, progress: int, message: str) -> None:
    n = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
        progress=progress, progress_message=message[:200], heartbeat_at=timezone.now()
    )
    if not n:
        raise RunAborted(run_id)


def _finish(run_id: int, token: str, *, apply: Callable[[], Any] | None = None, **fields: Any) -> bool:
    """Write the final status (+ result) in one conditional UPDATE inside a transaction.

    ``apply`` (a job's own writes) runs inside the same transaction once the claim is confirmed (and locked) and
    returns the run's result: it all commits together, or nothing does.
    """
    now = timezone.now()
    with transaction.atomic():
        mine = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token)
        if apply is not None:
            if not mine.update(heartbeat_at=now):  # the row lock (PostgreSQL) / write lock (SQLite) is ours now
                return False
            fields["result"] = apply()
        n = mine.update(finished_at=now, heartbeat_at=now, updated_at=now, **fields)
    if n:
        record_event(run_id, RunEvent.Kind.FINISHED, message=str(fields.get("status", "")), at=now)
    return bool(n)


def run_execute(*, run_id: int) -> SimulationRun | None:
    """Claim and execute one run (the body of the Celery task). Safe to call any number of times."""
    token = run_claim(run_id=run_id)
    if token is None:
        return None
    run = SimulationRun.objects.get(pk=run_id)
    # A heartbeat thread needs the claim committed (a second connection must see the row): inside an open
    # transaction (tests, an eager call) the engine's checkpoints renew the lease alone.
    beat = heartbeat_for(run_id, token, attempt=run.attempts, thread=not connection.in_atomic_block)
    try:
        _execute_claimed(run, token, beat)
    finally:
        beat.stop()
    return _after_finish(run_id)


def _execute_claimed(run: SimulationRun, token: str, beat: Heartbeat) -> None:
    run_id = run.pk

    def finish(**fields: Any) -> bool:
        beat.stop()  # the final write is ours to make; a renewal finding the run finished is expected
        return _finish(run_id, token, **fields)

    try:
        if run.kind in JobKind.values:
            _execute_job(run, token, beat, finish)
            return
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
                finish(status=RunStatus.SUCCEEDED, result=prior.result, reused_from=prior, progress=100,
                       progress_message=f"identical to run {prior.pk}; stored result reused")
                return
        _progress(run_id, token, 30, f"running {run.kind}")
        snapshot = run.input_snapshot
        def seeds_done(done: int, total: int) -> None:  # raises RunAborted once the run is cancelled
            unit = "replications" if run.kind == RunKind.FLEET else "seeds"
            _progress(run_id, token, 30 + (60 * done) // max(total, 1), f"{unit} {done}/{total}")

        args = (run.kind, dict(snapshot["document"]), dict(snapshot["catalog_values"]), run.params)
        # stepwise engines report progress (fabric studies: seeds); the others keep the 4-argument call
        # Cooperative budget: the engine's loops call checkpoint(), which stops the run past FP_RUN_BUDGET_S
        # (before Celery's soft limit) or once it was cancelled or lost its claim; each check also renews the lease.
        with work_budget(limits.run_budget_s(), what=f"run {run_id}", cancelled=beat.cancelled,
                         cancel_every_s=limits.HEARTBEAT_EVERY_S):
            stepwise = run.kind in (RunKind.FABRIC, RunKind.FLEET)
            result = compute(*args, progress=seeds_done) if stepwise else compute(*args)
        _progress(run_id, token, 90, "storing result")
        finish(status=RunStatus.SUCCEEDED, result=result, progress=100, progress_message="done", error="",
               error_field="")
    except (RunAborted, Cancelled):
        logger.info("run %s was cancelled or taken over; stopping", run_id)
    except BudgetExceeded as exc:
        finish(status=RunStatus.FAILED, error=f"{exc}; {budget_hint(run.kind)}",
               error_field="budget", progress=100, progress_message="failed")
    except TransientError:
        beat.stop()
        _release(run_id, token)
        raise
    except ValueError as exc:  # engine ScenarioError / CatalogError name the field
        field = str(getattr(exc, "field", "") or "")
        message = str(getattr(exc, "message", "") or exc)
        message = _with_way_out(message, field, run_id, str(getattr(exc, "code", "") or ""))
        finish(status=RunStatus.FAILED, error=message[:5000], error_field=field[:120], progress=100,
               progress_message="failed")
    except Exception as exc:
        if _is_transient(exc):
            beat.stop()
            _release(run_id, token)
            raise
        if type(exc).__name__ == "SoftTimeLimitExceeded":
            finish(status=RunStatus.FAILED, error="time limit exceeded", progress=100, progress_message="failed")
        else:
            logger.exception("run %s failed", run_id)
            finish(status=RunStatus.FAILED, error=f"internal error: {type(exc).__name__}: {exc}"[:5000], progress=100,
                   progress_message="failed")


def _execute_job(run: SimulationRun, token: str, beat: Heartbeat, finish: Callable[..., bool]) -> None:
    """A job on the team's own data (calibration import / fit): the engine work outside any transaction, then the
    job's writes and the run's end in one (``_finish``'s ``apply``). A refused input fails the run naming its
    field and line, and writes the refusal where the job's subject shows it (the file's status)."""
    run_id = run.pk

    def progress(percent: int, message: str) -> None:
        _progress(run_id, token, percent, message)

    with work_budget(limits.run_budget_s(), what=f"run {run_id}", cancelled=beat.cancelled,
                     cancel_every_s=limits.HEARTBEAT_EVERY_S):
        try:
            computed = calibration.job_compute(run=run, progress=progress)
        except ValidationError as exc:
            field, message = calibration.job_error(exc)
            finish(status=RunStatus.FAILED, error=message[:5000], error_field=field[:120], progress=100,
                   progress_message="failed", apply=lambda: calibration.job_failed(run=run, error=message))
            return
    progress(90, "storing")
    finish(status=RunStatus.SUCCEEDED, progress=100, progress_message="done", error="", error_field="",
           apply=lambda: calibration.job_commit(run=run, computed=computed))


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError | InterfaceError | ConnectionError | TimeoutError)


def _release(run_id: int, token: str) -> None:
    """Give a claimed run back to the queue before a transient-error retry."""
    for attempt in range(2):
        try:
            if SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
                status=RunStatus.QUEUED, claim_token="", progress_message="retrying after a transient error",
                heartbeat_at=timezone.now(),
            ):
                record_event(run_id, RunEvent.Kind.RELEASED, message="retrying after a transient error")
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
        if run.kind in JobKind.values:
            calibration.job_ended(run=run)
    return run


def run_reap(*, stuck_after_s: float | None = None, lease_s: float | None = None,
             redispatch_after_s: float | None = None, now: datetime | None = None,
             queue_depth: Callable[[], int | None] | None = None) -> dict[str, int]:
    """Bring back runs a dead worker or a lost message left behind (beat runs this every ``FP_REAPER_EVERY_S``).

    * RUNNING whose lease lapsed (``FP_RUN_LEASE_S``: no heartbeat for that long) → QUEUED and re-sent.
    * QUEUED older than ``FP_RUN_REDISPATCH_AFTER_S`` → re-sent when the broker's simulations queue holds fewer
      messages than there are queued runs (a flushed or restarted broker lost them; ``queue_depth`` None = cannot
      tell, re-send), or when older than ``FP_RUN_STUCK_AFTER_S`` whatever the broker says. A duplicate message is
      harmless (the claim refuses it); a queue backlog is not re-sent over and over.
    * Active runs past ``MAX_ATTEMPTS`` claims → FAILED.

    ``stuck_after_s`` sets all three ages at once (tests, ``manage.py`` callers of the old signature).
    """
    now = now or timezone.now()
    lease = lease_s or stuck_after_s or limits.run_lease_s()
    lapsed = now - timedelta(seconds=lease)
    stale = now - timedelta(seconds=redispatch_after_s or stuck_after_s or limits.run_redispatch_after_s())
    ancient = now - timedelta(seconds=stuck_after_s or limits.run_stuck_after_s())
    counts = {"requeued": 0, "redispatched": 0, "failed": 0}
    dead = Q(status=RunStatus.RUNNING, heartbeat_at__lt=lapsed) | Q(status=RunStatus.QUEUED, heartbeat_at__lt=stale)
    # Give up on runs that keep dying.
    given_up = list(SimulationRun.objects.filter(dead, attempts__gte=MAX_ATTEMPTS).values_list("pk", flat=True))
    if given_up:
        counts["failed"] = SimulationRun.objects.filter(dead, pk__in=given_up, attempts__gte=MAX_ATTEMPTS).update(
            status=RunStatus.FAILED, finished_at=now, error=f"gave up after {MAX_ATTEMPTS} attempts",
            progress_message="failed")
    ids: list[int] = []
    for run_id, beat_at, attempt in SimulationRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=lapsed
                                                                 ).values_list("pk", "heartbeat_at", "attempts"):
        if SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, heartbeat_at__lt=lapsed).update(
            status=RunStatus.QUEUED, claim_token="", heartbeat_at=now, progress_message="re-queued by reaper"
        ):
            counts["requeued"] += 1
            ids.append(run_id)
            silent = f"{(now - beat_at).total_seconds():.0f} s" if beat_at is not None else "ever"
            record_event(run_id, RunEvent.Kind.LEASE_LAPSED, attempt=attempt, worker="reaper", at=now,
                         message=f"no heartbeat for {silent} (lease {lease:g} s)")
    waiting = SimulationRun.objects.filter(status=RunStatus.QUEUED, heartbeat_at__lt=stale).exclude(pk__in=ids)
    candidates = list(waiting.values_list("pk", "heartbeat_at"))
    if candidates:
        depth = (queue_depth or dispatch.queue_depth)()
        queued = SimulationRun.objects.filter(status=RunStatus.QUEUED).count()
        short = depth is None or depth < queued
        for run_id, beat_at in candidates:
            if not short and beat_at is not None and beat_at >= ancient:
                continue  # its message is most likely still in the queue, behind others
            if SimulationRun.objects.filter(pk=run_id, status=RunStatus.QUEUED, heartbeat_at=beat_at).update(
                    heartbeat_at=now):
                counts["redispatched"] += 1
                ids.append(run_id)
                # the event is shown to the run's team: no counts of the whole broker (other teams' runs) in it
                why = ("the broker holds fewer messages than there are queued runs: this one's was lost"
                       if short and depth is not None
                       else "broker queue length unknown" if short else "queued past FP_RUN_STUCK_AFTER_S")
                record_event(run_id, RunEvent.Kind.REDISPATCHED, worker="reaper", at=now, message=why)
    if ids:
        dispatch.send_execute(ids)
    for sweep_id in set(SimulationRun.objects.filter(pk__in=ids + given_up, sweep__isnull=False).values_list(
            "sweep_id", flat=True)):
        sweep_refresh(sweep_id=sweep_id)
    for run in SimulationRun.objects.filter(pk__in=given_up, kind__in=JobKind.values):
        calibration.job_ended(run=run)
    return counts
