"""A Celery app for fault-injection tests: the real app, with every run's engine call made slow.

``celery_worker_factory(extra_env={"FP_TASK_TEST_DELAY_S": "2"})`` starts ``celery -A tests.slow_worker``: each
run then spends that many seconds in its engine call, calling the engine's cooperative ``checkpoint()`` as
it waits — so it heartbeats (renews its lease) and stops when cancelled, exactly like a long simulation.
Production code carries no test hook: the delay is this module's patch of ``execution.compute``.
``FP_TASK_TEST_NO_CHECKPOINT=1``: the delay never reaches a checkpoint (an engine deep in one numpy solve), so only
the execution's heartbeat thread keeps its lease (issue #23).
"""

from __future__ import annotations

import os
import time
from typing import Any

import django

from planner.celery import app

django.setup()  # the worker loads this module before Django: the services below import models

from engine.budget import checkpoint  # noqa: E402
from simulations.services import execution  # noqa: E402

__all__ = ["app"]

DELAY_S = float(os.environ.get("FP_TASK_TEST_DELAY_S") or 0)
NO_CHECKPOINT = os.environ.get("FP_TASK_TEST_NO_CHECKPOINT") == "1"
_engine_compute = execution.compute


def slow_compute(*args: Any, **kwargs: Any) -> dict[str, Any]:
    deadline = time.monotonic() + DELAY_S
    while time.monotonic() < deadline:
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        if not NO_CHECKPOINT:
            checkpoint()  # heartbeat; raises Cancelled once the run is cancelled or taken over
    return _engine_compute(*args, **kwargs)


execution.compute = slow_compute
