"""The portal's translation of the domain's errors (:mod:`core.errors`) into pages.

A portal view shows field errors beside its form itself; an error that escapes a view becomes the page a
browser expects: 404 for ``NotFound``, the 403 page for ``PermissionDenied``, and a 400/409/413 page naming
the problem for the others. API views never get here: DRF answers them through the API exception handler.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from core import errors

STATUS = {errors.Conflict: 409, errors.PayloadTooLarge: 413, errors.TooManyRequests: 429}


class DomainErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, errors.DomainError):
            return None
        if isinstance(exception, errors.NotFound):
            raise Http404(exception.message)
        if isinstance(exception, errors.PermissionDenied):
            raise DjangoPermissionDenied(exception.message)
        status = STATUS.get(type(exception), 400)
        return render(request, "portal/error.html", {"errors": exception.as_dict(), "status": status}, status=status)
