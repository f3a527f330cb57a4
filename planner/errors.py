"""Site-wide error views (Django's ``handler404``): a URL nothing routes answers in the language of its part of the
site, the API's JSON error body under /api/ and the portal's page elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found

API_PATH = "/api/"
NOT_FOUND = 404


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404 for an unrouted URL: under /api/ the body every API error has (core.api.errors: ``errors`` by field and
    ``status``), e.g. an id the router's pattern does not take (/api/v1/scenarios/a.b/run/); elsewhere the page."""
    if request.path.startswith(API_PATH):
        return JsonResponse({"errors": {"detail": ["Not found."]}, "status": NOT_FOUND}, status=NOT_FOUND)
    return page_not_found(request, exception)
