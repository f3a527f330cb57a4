"""The domain's errors: the one module services, selectors and scoping raise from.

They know nothing of HTTP or of Django REST framework. The API's exception handler
(``core.api.errors.exception_handler``) turns them into 400/403/404/409/413/429 responses with the usual
``{"errors": {field: [messages]}, "status": code}`` body, and the portal (``portal.views.common`` and
``portal.middleware``) turns them into form errors, 403 and 404 pages.

``detail`` is what DRF's ``ValidationError`` takes: a message, a list of messages, or a mapping of field
paths to messages (nested mappings are flattened to dotted paths by the API).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class DomainError(Exception):
    """Base class: a request the domain refuses, with field errors when it has them."""

    code = "invalid"
    default_message = "Invalid input."

    def __init__(self, detail: str | Sequence[Any] | Mapping[str, Any] | None = None, *,
                 codes: Mapping[str, str] | None = None) -> None:
        self.detail: Any = self.default_message if detail is None else detail
        #: machine codes of some fields' errors (``{dotted.field: code}``), e.g. an engine ScenarioError's
        #: ``no_layout``; a field without one answers ``invalid``
        self.codes: dict[str, str] = dict(codes or {})
        super().__init__(self.detail)

    @property
    def message(self) -> str:
        """One line for logs and messages: the first message found in ``detail``."""
        return _first(self.detail)

    def as_dict(self) -> dict[str, list[str]]:
        """``{dotted.field: [messages]}`` (``detail`` when the error names no field)."""
        return flatten(self.detail)


class ValidationError(DomainError):
    """Bad input: the fields named in ``detail`` and why (HTTP 400)."""


class PermissionDenied(DomainError):
    """The request's role may not do this in this team (HTTP 403)."""

    code = "permission_denied"
    default_message = "You do not have permission to perform this action."


class NotFound(DomainError):
    """The object does not exist or belongs to a team the request cannot see (HTTP 404)."""

    code = "not_found"
    default_message = "Not found."


class Conflict(DomainError):
    """The object is in use; ``detail["dependents"]`` lists what uses it (HTTP 409)."""

    code = "conflict"
    default_message = "Conflict."


class PayloadTooLarge(DomainError):
    """An upload over the size limit (HTTP 413)."""

    code = "payload_too_large"
    default_message = "Request body too large."


class TooManyRequests(DomainError):
    """The team already holds its share of the workers, or a limit on the request rate (HTTP 429 with
    ``Retry-After: retry_after``)."""

    code = "too_many_requests"
    default_message = "Too many requests."

    def __init__(self, detail: str | Sequence[Any] | Mapping[str, Any] | None = None, *, retry_after: int = 60) -> None:
        super().__init__(detail)
        self.retry_after = int(retry_after)


def field_error(field: str, message: str, code: str | None = None) -> ValidationError:
    """``ValidationError({field: [message]})``, with the field's machine code when given."""
    return ValidationError({field: [message]}, codes={field: code} if code else None)


def engine_error(exc: Exception, field: str | None = None) -> ValidationError:
    """An engine error (``ScenarioError``/``CatalogError``: ``field``, ``message``, ``code``) as a 400 naming
    ``field`` (default: the error's own) and keeping the engine's machine code."""
    name = field if field is not None else str(getattr(exc, "field", "") or "detail")
    return field_error(name, str(getattr(exc, "message", exc)), getattr(exc, "code", None))


def flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Nested error details → ``{"a.b.0.c": ["message", ...]}`` (``non_field_errors``/``__all__`` → ``detail``)."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            name = "detail" if key in ("non_field_errors", "__all__") and not prefix else str(key)
            path = f"{prefix}.{name}" if prefix else name
            for k, v in flatten(value, path).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(detail, list | tuple):
        if all(not isinstance(item, Mapping | list | tuple) for item in detail):
            out[prefix or "detail"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                if item in ({}, []):
                    continue
                path = f"{prefix}.{index}" if prefix else str(index)
                for k, v in flatten(item, path).items():
                    out.setdefault(k, []).extend(v)
    else:
        out[prefix or "detail"] = [str(detail)]
    return out


def _first(detail: Any) -> str:
    if isinstance(detail, Mapping):
        return next((_first(v) for v in detail.values()), "")
    if isinstance(detail, list | tuple):
        return _first(detail[0]) if detail else ""
    return str(detail)
