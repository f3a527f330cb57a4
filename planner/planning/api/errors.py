"""Hostile-input guards shared by the planning and simulation viewsets.

Django raises ``RequestDataTooBig`` when a body exceeds DATA_UPLOAD_MAX_MEMORY_SIZE, and ``json`` raises
``RecursionError`` on absurdly nested documents; neither is an APIException, so without this they would
be 500s. They become 413 and 400 in the usual error body.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.response import Response


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "payload_too_large"


def translate(exc: Exception) -> Exception:
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge(
            f"Request body exceeds DATA_UPLOAD_MAX_MEMORY_SIZE={settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
        )
    if isinstance(exc, RecursionError):
        return exceptions.ParseError("JSON parse error - nested too deeply.")
    return exc


class HostileInputMixin:
    """Map oversized and over-nested request bodies to 413/400 instead of 500."""

    def handle_exception(self, exc: Exception) -> Response:
        return super().handle_exception(translate(exc))  # type: ignore[misc]
