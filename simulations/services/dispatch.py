"""Sending work to Celery, by task name.

Services never import ``simulations.tasks`` (the tasks import the services). They look the task up in
the Celery app's registry by its registered name — a contract with queued messages, never renamed. The
registry is filled by Celery's own autodiscovery of every app's ``tasks`` module, so
``task_always_eager`` and tests that patch ``tasks.execute_run.apply_async`` behave exactly as with a
direct call.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import chord, current_app, group
from django.db import transaction

logger = logging.getLogger(__name__)

EXECUTE_RUN = "simulations.execute_run"
FINALIZE_SWEEP = "simulations.finalize_sweep"
DELIVER_WEBHOOK = "simulations.deliver_webhook"
SIMULATIONS_QUEUE = "simulations"
DEFAULT_QUEUE = "default"


def task(name: str) -> Any:
    """The registered Celery task called ``name`` (autodiscovering the apps' task modules once)."""
    if name not in current_app.tasks:
        current_app.loader.import_default_modules()
    return current_app.tasks[name]


def send_execute(run_ids: list[int]) -> None:
    """Queue one ``execute_run`` per id on the simulations queue (now, not on commit)."""
    execute = task(EXECUTE_RUN)
    for run_id in run_ids:
        execute.apply_async(args=[run_id], queue=SIMULATIONS_QUEUE)


def send_sweep(*, sweep_id: int, run_ids: list[int]) -> None:
    """Fan a sweep's children out as a chord on the simulations queue (callback on default)."""
    header = group(task(EXECUTE_RUN).si(run_id).set(queue=SIMULATIONS_QUEUE) for run_id in run_ids)
    try:
        chord(header)(task(FINALIZE_SWEEP).s(sweep_id=sweep_id).set(queue=DEFAULT_QUEUE))
    except NotImplementedError:  # result backend without chord support: children still aggregate
        header.apply_async()


def enqueue_runs(run_ids: list[int], *, sweep_id: int | None = None) -> None:
    """Send the execute tasks after the surrounding transaction commits."""

    def send() -> None:
        try:
            if sweep_id is not None and len(run_ids) > 1:
                send_sweep(sweep_id=sweep_id, run_ids=run_ids)
            else:
                send_execute(run_ids)
        except Exception:
            # The rows are committed; the reaper re-dispatches runs whose message never made it.
            logger.exception("could not enqueue runs %s; the reaper will retry", run_ids[:20])

    transaction.on_commit(send)


def enqueue_webhook(reevaluation_id: int) -> None:
    """Queue the delivery of one re-evaluation's webhook after the transaction commits."""

    def send() -> None:
        task(DELIVER_WEBHOOK).apply_async(args=[reevaluation_id], queue=DEFAULT_QUEUE)

    transaction.on_commit(send)
