"""Re-evaluations of watched scenarios and what changed."""

from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django_tables2 import RequestConfig

from planning.models import Scenario
from portal.tables import ReEvaluationTable
from simulations.models import ReEvaluation

logger = logging.getLogger(__name__)

REEVALUATIONS_PER_PAGE = 20


@login_required
@require_GET
def reevaluations(request: HttpRequest) -> HttpResponse:
    rows = (ReEvaluation.objects.for_request(request)
            .select_related("scenario", "capacity_plan", "previous_run", "new_run").order_by("-created_at"))
    table = ReEvaluationTable(rows)
    RequestConfig(request, paginate={"per_page": REEVALUATIONS_PER_PAGE}).configure(table)
    watched = Scenario.objects.for_request(request).filter(watched=True).count()
    return render(request, "portal/reevaluations.html", {"table": table, "watched_count": watched})
