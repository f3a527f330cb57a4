"""The run page's "explain": every term the engine computed for the run's layout, with units (issue #21)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from portal.views.common import _runs_for
from simulations.services.explain import run_explain


@login_required
@require_GET
def run_explain_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(_runs_for(request), pk=pk)
    return render(request, "portal/run_explain.html", {"run": run, "explained": run_explain(run=run)})
