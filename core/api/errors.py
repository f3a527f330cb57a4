"""One error body for every API failure.

Shape (documented in docs/api.md and the OpenAPI description)::

    {"errors": {"<field or 'detail'>": ["message", ...]}, "codes": {"<field>": ["code", ...]}, "status": 400}

``codes`` (400 and 409 only) runs beside ``errors``: one machine code per message, so a client decides by code,
never by wording — DRF's own (``required``, ``max_value``, ``invalid``...) and the engine's
(``ScenarioError.code``: ``no_layout``, ``out_of_range``... see ``engine/errors.py``). Nested serializer errors are flattened to dotted paths (``cluster.gpus``); list errors use indices
(``axes.0.values``). Unexpected exceptions are logged and become a 500 with the same shape, so clients
never have to parse HTML.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.exceptions import ErrorDetail
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core import errors as domain
from core.errors import flatten as flatten_errors
from engine.budget import BudgetExceeded

logger = logging.getLogger(__name__)


def error_body(errors: dict[str, list[str]], code: int) -> dict[str, Any]:
    """The body of every API error: messages by field path and the HTTP status."""
    return {"errors": errors, "status": code}


def error_response(errors: dict[str, list[str]], code: int) -> Response:
    return Response(error_body(errors, code), status=code)


def coded_detail(detail: Any, codes: dict[str, str]) -> Any:
    """``detail`` with each message of a field in ``codes`` carrying that machine code (DRF ``ErrorDetail``)."""
    if not codes:
        return detail
    return {field: [ErrorDetail(m, code=codes.get(field, "invalid")) for m in messages]
            for field, messages in flatten_errors(detail).items()}


class EngineBudgetExceeded(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The engine work of this request exceeded its time budget."
    default_code = "engine_budget_exceeded"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "payload_too_large"


class Conflict(exceptions.ValidationError):
    """409 with field-style errors (``{"detail": [...], "dependents": [...]}``)."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def translate_domain_error(exc: domain.DomainError) -> exceptions.APIException:
    """The domain's own errors (:mod:`core.errors`) as the DRF exceptions that answer them."""
    if isinstance(exc, domain.PermissionDenied):
        return exceptions.PermissionDenied(exc.message)
    if isinstance(exc, domain.NotFound):
        return exceptions.NotFound(exc.message)
    if isinstance(exc, domain.PayloadTooLarge):
        return PayloadTooLarge(exc.message)
    if isinstance(exc, domain.Conflict):
        return Conflict(coded_detail(exc.detail, exc.codes))
    if isinstance(exc, domain.TooManyRequests):
        return exceptions.Throttled(wait=exc.retry_after, detail=exc.message)
    return exceptions.ValidationError(coded_detail(exc.detail, exc.codes))


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # Hostile bodies: too large for DATA_UPLOAD_MAX_MEMORY_SIZE, nested past the parser's recursion limit,
    # or not decodable. None of these is an APIException, so without this they would be 500s.
    if isinstance(exc, OperationalError | InterfaceError):
        # A dropped database connection: a safe request is let through to planner.middleware.DatabaseRetryMiddleware,
        # which runs it again on a fresh connection; a write is never replayed and answers 503 (nothing committed).
        request = context.get("request")
        if getattr(request, "method", "") in ("GET", "HEAD", "OPTIONS"):
            return None
        logger.warning("database unavailable during %s: %s", getattr(request, "path", "?"), exc)
        unavailable = error_response({"detail": ["the database connection was lost; try again"]},
                                     status.HTTP_503_SERVICE_UNAVAILABLE)
        unavailable["Retry-After"] = "5"
        return unavailable
    if isinstance(exc, BudgetExceeded):
        exc = EngineBudgetExceeded(
            f"{exc}; narrow the request (fix some \"auto\" settings) or submit it as a run"
        )
    elif isinstance(exc, domain.DomainError):
        exc = translate_domain_error(exc)
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(
            f"Request body exceeds DATA_UPLOAD_MAX_MEMORY_SIZE={settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
        )
    elif isinstance(exc, SuspiciousOperation):
        # e.g. more multipart parts than DATA_UPLOAD_MAX_NUMBER_FIELDS / _FILES (TooManyFieldsSent,
        # TooManyFilesSent): the client's request, refused as Django refuses it for pages (400), never a 500
        exc = exceptions.ParseError(f"Request refused: {exc}"[:300])
    elif isinstance(exc, RecursionError):
        exc = exceptions.ParseError("JSON parse error - nested too deeply.")
    elif isinstance(exc, UnicodeDecodeError):
        exc = exceptions.ParseError("Request body is not valid UTF-8.")
    elif isinstance(exc, DataError):
        # The database refused a value (e.g. text it cannot store, a number out of range). Services write
        # inside transactions, so nothing was stored; it is the input's fault, not the server's.
        logger.info("database refused a value: %s", exc)
        first = (str(exc).strip().splitlines() or ["invalid value"])[0]
        exc = exceptions.ValidationError({"detail": [f"A value cannot be stored: {first}"]})
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, ValueError) and hasattr(exc, "field"):
        # Engine errors (ScenarioError / CatalogError) carry the offending field.
        exc = exceptions.ValidationError({str(exc.field): [
            ErrorDetail(str(getattr(exc, "message", exc)), code=str(getattr(exc, "code", None) or "invalid"))]})

    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("unhandled API error", exc_info=exc)
        return error_response({"detail": ["Internal server error."]}, status.HTTP_500_INTERNAL_SERVER_ERROR)
    data = response.data
    if isinstance(exc, exceptions.ValidationError):
        errors = flatten_errors(data)
    elif isinstance(data, dict) and "detail" in data:
        errors = {"detail": [str(data["detail"])]}
    else:
        errors = flatten_errors(data)
    body: dict[str, Any] = {"errors": errors}
    if response.status_code in (400, 409) and isinstance(exc, exceptions.APIException):
        body["codes"] = _codes_like(errors, flatten_errors(exc.get_codes()))
    body["status"] = response.status_code
    response.data = body
    if response.status_code == status.HTTP_503_SERVICE_UNAVAILABLE:
        response["Retry-After"] = "30"
    return response


def _codes_like(errors: dict[str, list[str]], codes: dict[str, list[str]]) -> dict[str, list[str]]:
    """One code per message of ``errors`` (``invalid`` where DRF gave none, e.g. a plain string detail)."""
    out = {}
    for field, messages in errors.items():
        given = codes.get(field, [])
        out[field] = [given[i] if i < len(given) else "invalid" for i in range(len(messages))]
    return out
