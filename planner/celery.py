"""The Celery application.

Broker and result backend come from settings (REDIS_URL in full mode; an embedded SQLite broker via
kombu's SQLAlchemy transport otherwise). Queues are declared once here.
"""

from __future__ import annotations

import os

from celery import Celery
from kombu import Exchange, Queue

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


@app.task(name="planner.ping")
def ping() -> str:
    """Liveness probe for the worker; used by readiness checks and integration tests."""
    return "pong"
