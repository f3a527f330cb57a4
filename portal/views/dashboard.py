"""The dashboard: recent runs, watched scenarios, fleets at a glance."""

from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Prefetch, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.roles import Capability
from accounts.scoping import visible_team_ids
from planning.models import Fleet, Scenario
from portal.views.common import _runs_for
from simulations.models import ACTIVE_STATUSES, ReEvaluation

logger = logging.getLogger(__name__)


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    runs = _runs_for(request).order_by("-created_at")[:8]
    latest_reeval = ReEvaluation.objects.order_by("-created_at")
    watched = (
        Scenario.objects.for_request(request)
        .filter(watched=True)
        .select_related("workload")
        .prefetch_related(Prefetch("reevaluations", queryset=latest_reeval, to_attr="reevals"))
        .order_by("name")[:10]
    )
    fleets = Fleet.objects.for_request(request)
    fleet_rows = list(fleets.order_by("name")[:8])
    totals = fleets.aggregate(n=Count("id"), servers=Sum("server_count"))
    gpus = sum(f.gpus for f in fleets.only("server_count", "gpus_per_node"))
    by_fabric: dict[str, int] = {}
    for f in fleets.only("fabric", "server_count", "gpus_per_node"):
        by_fabric[f.fabric] = by_fabric.get(f.fabric, 0) + f.gpus
    active = _runs_for(request).filter(status__in=ACTIVE_STATUSES).count()
    scenarios = Scenario.objects.for_request(request).count()
    return render(request, "portal/dashboard.html", {
        "runs": runs, "watched": watched, "fleets": fleet_rows, "fleet_count": totals["n"] or 0,
        "server_count": totals["servers"] or 0, "gpu_count": gpus, "by_fabric": sorted(by_fabric.items()),
        "active_runs": active, "scenario_count": scenarios,
        "can_plan": bool(visible_team_ids(request, Capability.PLAN)),
    })
