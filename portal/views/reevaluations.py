"""Re-evaluations of watched scenarios and what changed."""

from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from planning.models import Scenario
from portal import charts, panels
from simulations.models import ReEvaluation

logger = logging.getLogger(__name__)


@login_required
@require_GET
def reevaluations(request: HttpRequest) -> HttpResponse:
    rows = list(
        ReEvaluation.objects.for_request(request)
        .select_related("scenario", "capacity_plan", "previous_run", "new_run")
        .order_by("-created_at")[:100]
    )
    for r in rows:
        r.change_rows = charts.reevaluation_changes(r.changes)
        r.new_fit = panels.fit_problem(r.new_run) if r.new_run is not None else None
    watched = Scenario.objects.for_request(request).filter(watched=True).count()
    return render(request, "portal/reevaluations.html", {"rows": rows, "watched_count": watched})
