"""The capacity-plan builder and the side-by-side comparison of plans (issue #14).

The builder starts from the team's fleets (ticked fleets become clusters that follow the fleet) and workloads
(named jobs the engine times on each cluster), adds arrival streams, policy, failures and candidate purchases,
and optionally a demand-plan CSV (the same import service as ``POST /capacity-plans/{id}/import-jobs/``). Saving
is all or nothing: the plan service validates the whole document with the engine's plan parser first.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from accounts.roles import Capability
from core.errors import DomainError, ValidationError
from core.text import parse_id_list
from planning.models import CapacityPlan, Catalog, Fleet, Workload
from planning.services.capacity_plans import (
    capacity_plan_create,
    capacity_plan_import_jobs,
    capacity_plan_update,
)
from portal.forms.capacity import DEFAULT_ARRIVALS, CapacityPlanForm, PlanJobFormSet, job_initial
from portal.views.common import _error_dict, _require, _runs_for, _team_for_create
from simulations.models import RunKind, RunStatus
from simulations.services.capacity_plans import plan_runs
from simulations.services.plan_compare import MAX_COMPARED, compare_plan_runs, latest_plan_run


def _team_catalogs(team_id: int) -> list[Catalog]:
    return list(Catalog.objects.filter(team_id=team_id).order_by("name", "pk"))


def _team_objects(team_id: int) -> tuple[dict[str, Fleet], dict[str, Workload]]:
    fleets = {str(f.pk): f for f in Fleet.objects.filter(team_id=team_id).order_by("name", "pk")}
    workloads = {str(w.pk): w for w in Workload.objects.filter(team_id=team_id).order_by("name", "pk")}
    return fleets, workloads


def _save(request: HttpRequest, form: CapacityPlanForm, jobs_fs: Any, *, team: Any,
          plan: CapacityPlan | None) -> CapacityPlan | None:
    """Create or update the plan (and import the CSV) in one transaction; errors go onto the form."""
    jobs = [j for j in (f.job() for f in jobs_fs.forms) if j is not None]
    document, links = form.document(jobs, base=plan.document if plan is not None else None)
    fields = {"name": form.cleaned_data["name"], "description": form.cleaned_data.get("description") or "",
              "document": document, "cluster_fleets": links, "watched": bool(form.cleaned_data.get("watched")),
              "catalog": form.catalog_objects.get(form.cleaned_data.get("catalog") or "")}
    try:
        with transaction.atomic():
            if plan is None:
                plan = capacity_plan_create(team=team, user=request.user, **fields)
            else:
                plan = capacity_plan_update(plan=plan, user=request.user, **fields)
            upload = form.cleaned_data.get("demand_csv")
            if upload:
                plan = capacity_plan_import_jobs(plan=plan, user=request.user, file=upload, replace=True)
    except DomainError as exc:
        errors = _error_dict(exc)
        for path in [p for p in errors if p.startswith("rows.")][:10]:  # CSV errors per line: rows.<line>.<column>
            _, line, *column = path.split(".")
            msgs = errors.pop(path)
            text = " ".join(map(str, msgs)) if isinstance(msgs, list | tuple) else str(msgs)
            form.add_error("demand_csv", f"line {line}{', ' + '.'.join(column) if column else ''}: {text}")
        errors = {k: v for k, v in errors.items() if not k.startswith("rows.")}
        form.add_path_errors(errors)
        return None
    return plan


def _check_job_rows(request: HttpRequest) -> None:
    """Refuse a posted job-row count over the formset's limit before any form is built (a faked 1,000,000 rows
    otherwise builds and renders 500 forms): a 400 page naming the limit and the way out (#23)."""
    raw = str(request.POST.get("jobs-TOTAL_FORMS", "0")).strip()
    limit = int(PlanJobFormSet.max_num or 0)
    if not raw.isdigit() or len(raw) > 9 or int(raw) > limit:
        shown = f"{int(raw):,}" if raw.isdigit() and len(raw) <= 9 else "a number that is not a row count"
        raise ValidationError({"jobs": [f"at most {limit} job rows in the builder, got {shown}; import a demand-plan "
                                        "CSV (demand_csv) for more jobs"]})


@login_required
@require_http_methods(["GET", "POST"])
def capacity_plan_form(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    plan = None
    if pk is not None:
        plan = get_object_or_404(CapacityPlan.objects.for_request(request).select_related("team"), pk=pk)
        _require(request, plan.team_id, Capability.PLAN)
        team = plan.team
    else:
        team = _team_for_create(request, Capability.PLAN)
    fleets, workloads = _team_objects(team.pk)
    catalogs = _team_catalogs(team.pk)
    if request.method == "POST":
        _check_job_rows(request)
        form = CapacityPlanForm(request.POST, request.FILES, fleets=fleets.values(), catalogs=catalogs)
        jobs_fs = PlanJobFormSet(request.POST, prefix="jobs", form_kwargs={"workloads": workloads})
        if form.is_valid() and jobs_fs.is_valid():
            saved = _save(request, form, jobs_fs, team=team, plan=plan)
            if saved is not None:
                messages.success(request, f"Capacity plan “{saved.name}” saved.")
                return HttpResponseRedirect(reverse("capacity-plan-edit", args=[saved.pk]))
    elif plan is not None:
        form = CapacityPlanForm(initial=CapacityPlanForm.initial_for(plan, fleets), fleets=fleets.values(), catalogs=catalogs)
        jobs_fs = PlanJobFormSet(prefix="jobs", initial=job_initial(plan.document.get("jobs") or [], workloads),
                                 form_kwargs={"workloads": workloads})
    else:
        form = CapacityPlanForm(initial={"arrivals": json.dumps(DEFAULT_ARRIVALS, indent=1),
                                         "fleets": list(fleets)}, fleets=fleets.values(), catalogs=catalogs)
        jobs_fs = PlanJobFormSet(prefix="jobs", form_kwargs={"workloads": workloads})
    latest = plan_runs(plan).first() if plan is not None else None
    return render(request, "portal/capacity_plan_form.html", {
        "form": form, "jobs_fs": jobs_fs, "plan": plan, "team": team, "section": "capacity",
        "has_fleets": bool(fleets), "has_workloads": bool(workloads), "latest": latest,
    }, status=400 if request.method == "POST" else 200)  # a POST rendered here was refused: errors beside the fields


def _ids(raw: str, field: str) -> list[int]:
    """At most MAX_COMPARED ids, checked on the text before any query (999 ids: a 400 page at once, #23)."""
    try:
        return parse_id_list(raw, limit=MAX_COMPARED, what=f"{field} to compare", unique=False)
    except ValueError as exc:
        raise ValidationError({field: [str(exc)]}) from None


@login_required
@require_GET
def capacity_compare(request: HttpRequest) -> HttpResponse:
    """Two to four plans (their latest finished runs) or plan runs side by side."""
    plans = list(CapacityPlan.objects.for_request(request).order_by("name", "pk"))
    ctx: dict[str, Any] = {"section": "capacity", "plans": plans, "max": MAX_COMPARED, "error": None,
                           "selected_plans": [], "selected_runs": []}
    plan_ids = _ids(request.GET.get("plans", "") if request.GET.get("plans") else ",".join(request.GET.getlist("plan")),
                    "plans")
    run_ids = _ids(request.GET.get("runs", ""), "runs") if request.GET.get("runs") else []
    try:
        if run_ids:
            visible = {r.pk: r for r in _runs_for(request).filter(kind=RunKind.FLEET, pk__in=run_ids)}
            if any(i not in visible for i in run_ids):
                raise Http404("run not found")
            runs = [visible[i] for i in run_ids]
            ctx["selected_runs"] = run_ids
        elif plan_ids:
            found = {p.pk: p for p in plans if p.pk in plan_ids}
            if any(i not in found for i in plan_ids):
                raise Http404("plan not found")
            ctx["selected_plans"] = plan_ids
            runs = [latest_plan_run(found[i]) for i in plan_ids]
        else:
            runs = []
        if runs:
            ctx["cmp"] = compare_plan_runs(runs)
    except DomainError as exc:
        ctx["error"] = "; ".join(" ".join(map(str, v)) if isinstance(v, list) else str(v)
                                 for v in _error_dict(exc).values())
    ctx["finished"] = {p.pk: plan_runs(p).filter(status=RunStatus.SUCCEEDED, sweep__isnull=True).exists()
                       for p in plans}
    return render(request, "portal/capacity_compare.html", ctx)
