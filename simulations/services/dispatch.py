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
from kombu.exceptions import ChannelError

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


def declare_queues() -> None:
    """Declare the app's queues and bindings, uncached (a flushed broker lost them; kombu remembers having declared
    them for the life of a connection, so without this a long-lived process sends into kombu's dead-letter list)."""
    if current_app.conf.task_always_eager:
        return
    try:
        with current_app.pool.acquire(block=True, timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
            channel = conn.default_channel
            for queue in current_app.conf.task_queues or ():
                queue(channel).declare()
    except Exception:  # the send below fails (and is logged) or the reaper re-sends later
        logger.warning("could not declare the queues", exc_info=True)


def send_execute(run_ids: list[int]) -> None:
    """Queue one ``execute_run`` per id on the simulations queue (now, not on commit)."""
    declare_queues()
    execute = task(EXECUTE_RUN)
    for run_id in run_ids:
        execute.apply_async(args=[run_id], queue=SIMULATIONS_QUEUE)


def queue_depth(queue: str = SIMULATIONS_QUEUE) -> int | None:
    """Messages waiting in ``queue`` on the broker (not those a worker reserved); None when the broker cannot say.

    The reaper compares it with the number of queued runs: fewer messages than queued runs means the broker lost
    some (flushed, restarted without persistence), so it re-sends them. A queue the broker does not know (Redis
    drops an empty list's key, and a flush drops them all) holds 0 messages.
    """
    try:
        with current_app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            try:
                ok = conn.default_channel.queue_declare(queue=queue, passive=True)
            except ChannelError:
                return 0
            return int(ok.message_count)
    except Exception:
        logger.warning("could not read the length of queue %s", queue, exc_info=True)
        return None


def send_sweep(*, sweep_id: int, run_ids: list[int]) -> None:
    """Fan a sweep's children out as a chord on the simulations queue (callback on default)."""
    declare_queues()
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
