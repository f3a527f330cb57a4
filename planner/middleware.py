"""Request ids for logs and responses."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from core.context import current_request_id
from core.context import request_id as _request_id
from engine.budget import BudgetExceeded, work_budget
from simulations import limits

__all__ = ["RequestIdLogFilter", "RequestIdMiddleware", "WorkBudgetMiddleware", "current_request_id"]


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
        if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
            response: HttpResponse = JsonResponse({"errors": {"detail": [message]}, "status": 503}, status=503)
        else:
            response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = "30"
        return response
