"""Request ids for logs and responses; the engine work budget of a request; a transient database drop retried."""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Callable

from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse, JsonResponse

from core.context import current_request_id
from core.context import request_id as _request_id
from engine.budget import BudgetExceeded, work_budget
from simulations import limits

logger = logging.getLogger(__name__)

__all__ = ["DatabaseRetryMiddleware", "RequestIdLogFilter", "RequestIdMiddleware", "WorkBudgetMiddleware",
           "current_request_id"]


class RequestIdMiddleware:
    """Tags each request with an id (from X-Request-ID or new) echoed in the response and the logs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        rid = incoming if incoming and len(incoming) <= 64 and incoming.isprintable() else uuid.uuid4().hex
        token = _request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            _request_id.reset(token)
        response["X-Request-ID"] = rid
        return response


class RequestIdLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _request_id.get()
        return True


class WorkBudgetMiddleware:
    """Every request's engine work runs under ``FP_WEB_ENGINE_BUDGET_S``, well below the web timeout.

    The engine's long loops call ``engine.budget.checkpoint()``; past the budget it raises
    ``BudgetExceeded``, which the API's exception handler and :meth:`process_exception` (portal pages) turn into
    a 503 — a JSON body for the API — instead of a worker held until gunicorn kills it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with work_budget(limits.web_engine_budget_s(), what="this request's engine work"):
            return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, BudgetExceeded):
            return None
        message = f"{exception}; narrow the request (fix some \"auto\" settings) or submit it as a run"
        return service_unavailable(request, message, retry_after_s=30)


def service_unavailable(request: HttpRequest, message: str, *, retry_after_s: int) -> HttpResponse:
    """503 with ``Retry-After``: the API's error body for API / JSON clients, plain text for a page."""
    if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
        response: HttpResponse = JsonResponse({"errors": {"detail": [message]}, "status": 503}, status=503)
    else:
        response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(retry_after_s)
    return response


# ------------------------------------------------------------------------- a dropped connection (issue #23)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
DB_ERRORS = (OperationalError, InterfaceError)
_RETRY = "_fp_db_retry"  # request attribute: "armed" (may retry), "wanted" (a drop happened), "done" (retried)


def _close_connections() -> bool:
    """Close every connection so the next query opens a fresh one; False when one is inside a transaction (its
    work cannot be replayed by reconnecting)."""
    if any(conn.in_atomic_block for conn in connections.all(initialized_only=True)):
        return False
    for conn in connections.all(initialized_only=True):
        conn.close()
    return True


def _unavailable(request: HttpRequest) -> HttpResponse:
    return service_unavailable(request, "the database connection was lost; try again", retry_after_s=5)


def _note_drop(sender: object, request: HttpRequest | None = None, **kwargs: object) -> None:
    """A database error escaped a view or a middleware of a retryable request: ask for the retry (or, on the
    retry itself, give up with a 503)."""
    exc = sys.exc_info()[1]
    state = getattr(request, _RETRY, None) if request is not None else None
    if state in ("armed", "done") and isinstance(exc, DB_ERRORS):
        setattr(request, _RETRY, "wanted" if state == "armed" else "failed")


got_request_exception.connect(_note_drop, dispatch_uid="fp-db-retry")


class DatabaseRetryMiddleware:
    """A dropped or killed database connection never answers 500 on an idempotent request.

    A ``GET``/``HEAD``/``OPTIONS`` that fails with ``OperationalError`` or ``InterfaceError`` (the server closed the
    connection, PostgreSQL was restarted, a pooler dropped it) is run once more on fresh connections — it changed
    nothing, so running it again is safe. A second failure, or a drop inside a transaction, answers 503 with
    ``Retry-After``; writes are never replayed (the API's exception handler answers them 503 too). The failure is
    noticed from the view (``process_exception``, also reached by the API, whose handler lets database errors of
    safe requests through) or, from an inner middleware, through Django's ``got_request_exception`` signal.
    Place it first after the request id middleware, so everything below it is retried.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in SAFE_METHODS:
            return self.get_response(request)
        setattr(request, _RETRY, "armed")
        response = self.get_response(request)
        if getattr(request, _RETRY, None) != "wanted":
            return response
        if not _close_connections():
            return _unavailable(request)
        logger.warning("database connection lost during %s %s; retrying once", request.method, request.path)
        setattr(request, _RETRY, "done")
        response = self.get_response(request)
        if getattr(request, _RETRY, None) == "failed" or getattr(response, "_fp_db_dropped", False):
            _close_connections()
            return _unavailable(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DB_ERRORS) or request.method not in SAFE_METHODS:
            return None
        state = getattr(request, _RETRY, None)
        if state == "armed":
            setattr(request, _RETRY, "wanted")
        response = _unavailable(request)  # replaced by the retry's answer when one is made (see __call__)
        response._fp_db_dropped = True  # type: ignore[attr-defined]
        return response

