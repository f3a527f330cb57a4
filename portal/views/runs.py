"""Run and sweep pages: list (django-tables2, django-filter), detail with live progress, cancel."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_tables2 import RequestConfig

from accounts.roles import Capability
from accounts.scoping import visible_team_ids
from core.errors import ValidationError
from portal.filters import RunFilter, filtered
from portal.tables import RunTable, SweepTable
from portal.views.common import _can, _error_dict, _htmx, _require, _runs_for
from portal.views.run_page import run_context
from simulations import services as sim_services
from simulations.models import ACTIVE_STATUSES, TERMINAL_STATUSES, RunStatus, Sweep

logger = logging.getLogger(__name__)


RUNS_PER_PAGE = 50
SWEEPS_PER_PAGE = 10


@login_required
@require_GET
def runs(request: HttpRequest) -> HttpResponse:
    run_filter = RunFilter(request.GET, queryset=_runs_for(request).order_by("-created_at"), request=request)
    rows = filtered(run_filter, not_found=("scenario",))
    plan_teams = set(visible_team_ids(request, Capability.PLAN))
    table = RunTable(rows, plan_teams=plan_teams)
    sweep_rows = (Sweep.objects.for_request(request).select_related("scenario")
                  .annotate(done=Count("runs", filter=Q(runs__status__in=TERMINAL_STATUSES))).order_by("-created_at"))
    sweeps = SweepTable(sweep_rows, prefix="sweeps-")
    RequestConfig(request, paginate={"per_page": RUNS_PER_PAGE}).configure(table)
    RequestConfig(request, paginate={"per_page": SWEEPS_PER_PAGE}).configure(sweeps)
    ctx = {
        "table": table, "sweeps": sweeps, "status": run_filter.form.cleaned_data.get("status") or "",
        # poll while anything listed may still change
        "any_active": rows.filter(status__in=ACTIVE_STATUSES).exists()
        or sweep_rows.filter(status__in=ACTIVE_STATUSES).exists(),
    }
    if _htmx(request) and request.GET.get("partial") == "table":
        return render(request, "portal/_runs_live.html", ctx)
    return render(request, "portal/runs.html", ctx)


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(_runs_for(request).select_related("catalog_version__catalog"), pk=pk)
    ctx = run_context(request, run)
    if _htmx(request) and request.GET.get("partial") == "status":
        # the whole live block: when the run has finished it brings the results and stops polling
        return render(request, "portal/_run_live.html", ctx)
    return render(request, "portal/run_detail.html", ctx)


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(_runs_for(request), pk=pk)
    _require(request, run.team_id, Capability.PLAN)
    try:
        sim_services.run_cancel(run=run, user=request.user)
        messages.success(request, f"Run #{run.pk}: cancellation requested.")
    except (ValidationError, DjangoValidationError, ValueError) as exc:
        messages.error(request, " ".join(" ".join(map(str, v)) for v in _error_dict(exc).values()))
    nxt = request.POST.get("next") or reverse("runs")
    if not nxt.startswith("/") or nxt.startswith("//"):
        nxt = reverse("runs")
    if _htmx(request):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = nxt
        return response
    return HttpResponseRedirect(nxt)


@login_required
@require_GET
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = get_object_or_404(Sweep.objects.for_request(request).select_related("scenario"), pk=pk)
    runs_qs = list(sweep.runs.order_by("id"))
    done = sum(1 for r in runs_qs if r.status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED))
    total = sweep.total_runs or len(runs_qs)
    progress_sum = sum(100 if r.is_terminal else r.progress for r in runs_qs)
    percent = round(progress_sum / total) if total else 0
    finished = total > 0 and done >= total
    succeeded = [r for r in runs_qs if r.status == RunStatus.SUCCEEDED]
    ctx = {
        "sweep": sweep, "runs": runs_qs, "done": done, "total": total, "percent": percent, "finished": finished,
        "succeeded_ids": ",".join(str(r.pk) for r in succeeded), "baseline_id": succeeded[0].pk if succeeded else None,
        "can_plan": _can(request, sweep.team_id, Capability.PLAN),
        "axes": sweep.axes,
    }
    if _htmx(request) and request.GET.get("partial") == "progress":
        return render(request, "portal/_sweep_progress.html", ctx)
    return render(request, "portal/sweep_detail.html", ctx)
