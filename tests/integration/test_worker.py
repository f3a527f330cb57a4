"""A real ``celery worker`` process against Redis runs a task end to end."""

from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_broker_is_redis_and_database_is_postgresql() -> None:
    assert settings.BROKER_KIND == "redis"
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def test_real_worker_runs_a_task(celery_worker_factory, purge_broker) -> None:
    from planner.celery import ping

    worker = celery_worker_factory()
    result = ping.apply_async(queue="default")
    assert result.get(timeout=30) == "pong"
    assert worker.proc.poll() is None
    assert "planner.ping" in worker.output()
