"""Liveness (/healthz) and readiness (/readyz: database and broker reachable)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from planner.celery import app

logger = logging.getLogger(__name__)


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return f"database unreachable: {exc.__class__.__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def check_broker() -> str | None:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return f"broker unreachable ({settings.BROKER_KIND}): {exc.__class__.__name__}: {exc}"
    return None


@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": check_database(), "broker": check_broker()}
    failed = {k: v for k, v in checks.items() if v}
    body = {
        "status": "unavailable" if failed else "ready",
        "checks": {k: (v or "ok") for k, v in checks.items()},
    }
    if failed:
        logger.warning("readiness failed: %s", failed)
    return JsonResponse(body, status=503 if failed else 200)
