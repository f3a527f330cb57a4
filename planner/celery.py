"""The Celery application.

Broker and result backend come from settings (REDIS_URL in full mode; an embedded SQLite broker via
kombu's SQLAlchemy transport otherwise). Queues are declared once here.

A broker that loses its state (Redis FLUSHDB, a restart without persistence) also loses the bindings of the
queues to their exchanges, and a process that declared them once never declares them again: every message sent
afterwards (beat's reaper, new runs) would go to kombu's dead-letter list. Each worker therefore re-declares the
queues every ``FP_REAPER_EVERY_S`` (:class:`RedeclareQueues`), and ``simulations.services.dispatch`` declares them
before it sends runs (issue #23).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, bootsteps
from django.conf import settings
from kombu import Exchange, Queue

logger = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner.settings")

app = Celery("planner")
app.config_from_object("django.conf:settings", namespace="CELERY")

# Named queues: long simulations get their own queue (prefetch 1, acks late) so a slow sweep never
# starves the housekeeping tasks (reaper, re-evaluation, webhooks).
app.conf.task_queues = (
    Queue("default", Exchange("default"), routing_key="default"),
    Queue("simulations", Exchange("simulations"), routing_key="simulations"),
)
app.conf.task_default_queue = "default"
app.autodiscover_tasks()


def redeclare_queues(conn: Any) -> None:
    """Declare every queue, its exchange and binding on ``conn`` (uncached: kombu's ``maybe_declare`` remembers a
    declaration for the life of the connection, the broker may not)."""
    channel = conn.default_channel
    for queue in app.conf.task_queues:
        queue(channel).declare()


class RedeclareQueues(bootsteps.StartStopStep):
    """Worker consumer step: re-declare the queues every ``FP_REAPER_EVERY_S`` seconds on a connection of its own."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, c: Any, **kwargs: Any) -> None:
        self.tref: Any = None
        super().__init__(c, **kwargs)

    def start(self, c: Any) -> None:
        every = float(getattr(settings, "FP_REAPER_EVERY_S", 15))
        self.tref = c.timer.call_repeatedly(every, self.redeclare, (c,), priority=10)

    def redeclare(self, c: Any) -> None:
        try:
            with c.app.connection_for_write() as conn:
                redeclare_queues(conn)
        except Exception:  # the broker is down: the consumer reconnects and declares them itself
            logger.warning("could not re-declare the queues", exc_info=True)

    def stop(self, c: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    shutdown = stop


app.steps["consumer"].add(RedeclareQueues)


@app.task(name="planner.ping")
def ping() -> str:
    """Liveness probe for the worker; used by readiness checks and integration tests."""
    return "pong"
