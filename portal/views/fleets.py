"""Fleet pages: list, create, edit."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_tables2 import RequestConfig

from accounts.roles import Capability
from accounts.scoping import active_team, visible_team_ids
from core.errors import ValidationError
from planning import services
from planning.models import Fleet
from portal.forms import FleetForm
from portal.tables import FleetTable
from portal.views.common import _catalog_items, _error_dict, _require, _team_for_create

logger = logging.getLogger(__name__)

FLEETS_PER_PAGE = 50


@login_required
@require_GET
def fleets(request: HttpRequest) -> HttpResponse:
    rows = Fleet.objects.for_request(request).select_related("team").annotate(n_scenarios=Count("scenarios"))
    table = FleetTable(rows.order_by("name"), plan_teams=set(visible_team_ids(request, Capability.PLAN)))
    RequestConfig(request, paginate={"per_page": FLEETS_PER_PAGE}).configure(table)
    return render(request, "portal/fleets.html", {
        "table": table,
        "gpu_total": sum(f.gpus for f in rows),  # every visible fleet, not only this page's
        "can_plan": active_team(request, Capability.PLAN) is not None,
    })


@login_required
@require_http_methods(["GET", "POST"])
def fleet_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    fleet = None
    if pk is not None:
        fleet = get_object_or_404(Fleet.objects.for_request(request), pk=pk)
        _require(request, fleet.team_id, Capability.PLAN)
        team = fleet.team
    else:
        team = _team_for_create(request)
    items = _catalog_items()
    initial = {f: getattr(fleet, f) for f in FleetForm.FIELDS} if fleet else {}
    form = FleetForm(request.POST or None, initial=initial, catalog_items=items)
    if request.method == "POST" and form.is_valid():
        data = form.data_for_service()
        try:
            if fleet is None:
                fleet = services.fleet_create(team=team, user=request.user, **data)
                messages.success(request, f"Fleet “{fleet.name}” created.")
            else:
                fleet = services.fleet_update(fleet=fleet, user=request.user, **data)
                messages.success(request, f"Fleet “{fleet.name}” saved.")
            return HttpResponseRedirect(reverse("fleets"))
        except (ValidationError, DjangoValidationError) as exc:
            form.add_path_errors(_error_dict(exc))
    status = 400 if request.method == "POST" else 200
    return render(request, "portal/fleet_form.html", {"form": form, "fleet": fleet, "team": team}, status=status)
