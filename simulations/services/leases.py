"""Run leases (issue #23): a claimed run is leased to one execution, which renews the lease from a heartbeat.

* The lease is ``heartbeat_at`` + ``FP_RUN_LEASE_S`` (30 s). A RUNNING run whose lease lapsed belongs to a dead
  or cut-off execution: the next delivery of its message claims it, or the reaper re-queues it.
* :class:`Heartbeat` renews the lease from a daemon thread every ``FP_RUN_HEARTBEAT_S`` (at most a third of the
  lease) while the run works, whether or not the engine reaches a checkpoint; the engine's checkpoints renew it
  too (and see a cancel within ``limits.HEARTBEAT_EVERY_S``). Each renewal is one compare-and-set UPDATE on the
  run's claim token: when it matches no row the run was cancelled or claimed by another execution, and the
  heartbeat says so (:attr:`Heartbeat.lost`); the execution then stops at its next checkpoint or progress write
  and writes nothing (its final write is guarded by the same token). An execution that cannot renew for a whole
  lease (database unreachable) counts its claim as lost too: another worker may hold it by then.
* Inside an open transaction (tests, eager calls) no thread is started: a second database connection could not
  see the uncommitted run row, and no other execution can see the claim either.

Timestamps come from the callers (``now``) and the clock is injectable, so the rules are testable without
waiting.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from simulations import limits
from simulations.models import RunEvent, RunStatus, SimulationRun

logger = logging.getLogger(__name__)

def worker_id() -> str:
    """host:pid of this process (computed per call: a prefork child has its own pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_lapsed(heartbeat_at: datetime | None, *, now: datetime, lease_s: float) -> bool:
    """Whether a lease renewed at ``heartbeat_at`` has lapsed at ``now``."""
    return heartbeat_at is None or heartbeat_at < now - timedelta(seconds=lease_s)


def renew_lease(run_id: int, token: str, *, now: datetime | None = None) -> bool:
    """One renewal: True while the run is RUNNING under ``token`` (compare-and-set on the claim token)."""
    return bool(SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
        heartbeat_at=now or timezone.now()))


def record_event(run_id: int, kind: str, *, attempt: int = 0, message: str = "", worker: str | None = None,
                 at: datetime | None = None) -> None:
    """Append one event to a run's history (best effort: an event never fails the run)."""
    try:
        RunEvent.objects.create(run_id=run_id, kind=kind, attempt=attempt, message=message[:300],
                                worker=(worker if worker is not None else worker_id())[:200], at=at or timezone.now())
    except Exception:  # the run row may be gone, or the connection broken: the run's own writes decide
        logger.warning("could not record %s event of run %s", kind, run_id, exc_info=True)


class Heartbeat:
    """Renews one execution's lease; knows when the execution lost its claim.

    ``renew()`` returns True while the claim holds, False once it is gone (cancelled, taken over, finished), and
    raises on a database error. ``clock`` is monotonic seconds.
    """

    def __init__(self, *, renew: Callable[[], bool], lease_s: float, every_s: float,
                 clock: Callable[[], float] = time.monotonic, on_lost: Callable[[str], None] | None = None,
                 what: str = "run") -> None:
        self.renew = renew
        self.lease_s = float(lease_s)
        self.every_s = float(every_s)
        self.clock = clock
        self.on_lost = on_lost
        self.what = what
        self.last_ok = clock()
        self.beats = 0
        self.failed_last = False
        self.reason = ""
        self._lost = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def _lose(self, reason: str) -> None:
        with self._lock:
            if self._lost.is_set():
                return
            self.reason = reason
            self._lost.set()
        if self._stopped.is_set():
            return  # the execution is writing its own end: a renewal that finds it finished is expected
        logger.warning("%s lost its claim: %s", self.what, reason)
        if self.on_lost is not None:
            self.on_lost(reason)

    def beat(self, *, raise_errors: bool = False) -> bool:
        """Renew once; True while the claim is ours. A database error counts against the lease (the claim is lost
        once no renewal succeeded for a whole lease); ``raise_errors`` re-raises it after counting."""
        if self._lost.is_set():
            return False
        try:
            ok: bool | None = bool(self.renew())
        except Exception:
            self.failed_last = True
            if raise_errors:
                self._count_failure()
                raise
            logger.warning("%s: lease renewal failed", self.what, exc_info=True)
            ok = None
        if ok:
            with self._lock:
                self.last_ok = max(self.last_ok, self.clock())
                self.beats += 1
                self.failed_last = False
        elif ok is False:
            self._lose("the run was cancelled, finished or claimed by another execution")
        else:
            self._count_failure()
        return not self._lost.is_set()

    def _count_failure(self) -> None:
        silent = self.clock() - self.last_ok
        if silent >= self.lease_s:
            self._lose(f"no lease renewal succeeded for {silent:.0f} s (lease {self.lease_s:g} s)")

    def due_in(self) -> float:
        """Seconds until the next renewal is due (0 when it is)."""
        return max(0.0, self.last_ok + self.every_s - self.clock())

    def cancelled(self) -> bool:
        """The work budget's cancel callback (called from engine checkpoints): renews; True once the claim is lost."""
        return not self.beat(raise_errors=True)

    # --- the thread --------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"heartbeat {self.what}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        delay = self.due_in()
        try:
            while not self._stopped.wait(delay):
                if self.due_in() > 0:  # a checkpoint renewed meanwhile
                    delay = self.due_in()
                    continue
                if not self.beat():
                    break
                if self.failed_last:  # a broken connection: reconnect and retry soon, the lease is running out
                    connection.close()
                    delay = min(self.every_s, 1.0)
                else:
                    delay = self.due_in()
        finally:
            connection.close()  # this thread's own connection

    def stop(self) -> None:
        """Stop renewing (idempotent); the execution is about to write its end, or has."""
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(self.every_s, 5.0))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def heartbeat_for(run_id: int, token: str, *, attempt: int, thread: bool) -> Heartbeat:
    """The heartbeat of one claimed execution (started as a thread when ``thread``)."""

    def lost(reason: str) -> None:
        row: Mapping[str, Any] = SimulationRun.objects.filter(pk=run_id).values(
            "status", "claim_token", "attempts").first() or {}
        if row.get("status") == RunStatus.CANCELLED:
            reason = "the run was cancelled; stopping"
        elif row.get("claim_token") not in ("", token, None):
            reason = f"claimed by another execution (attempt {row.get('attempts')}); stopping without writing"
        record_event(run_id, RunEvent.Kind.LOST, attempt=attempt, message=reason)

    beat = Heartbeat(renew=lambda: renew_lease(run_id, token), lease_s=limits.run_lease_s(),
                     every_s=limits.run_heartbeat_s(), on_lost=lost, what=f"run {run_id}")
    if thread:
        beat.start()
    return beat


def lease_info() -> dict[str, Any]:
    """The lease settings in force (operations pages, tests)."""
    return {"lease_s": limits.run_lease_s(), "heartbeat_s": limits.run_heartbeat_s(),
            "reaper_every_s": limits.reaper_every_s(), "recovery_bound_s": limits.recovery_bound_s()}
