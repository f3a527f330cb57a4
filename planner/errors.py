"""Site-wide error views (Django's ``handler404``): a URL nothing routes answers in the language of its part of the
site, the API's JSON error body under /api/ and the portal's page elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status

from core.api.errors import error_body

API_PATH = "/api/"


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404 for an unrouted URL: under /api/ the body every API error has (core.api.errors.error_body) with DRF's
    not-found message, e.g. an id the router's pattern does not take (/api/v1/scenarios/a.b/run/); elsewhere the
    page."""
    if request.path.startswith(API_PATH):
        code = status.HTTP_404_NOT_FOUND
        return JsonResponse(error_body({"detail": [str(exceptions.NotFound.default_detail)]}, code), status=code)
    return page_not_found(request, exception)
