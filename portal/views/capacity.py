"""Capacity plans in the portal (issue #14): the team's plans, a run button, and the results page — a stacked
utilization-over-time chart per cluster with the P10–P90 band, the first shortfall day, the deadline table and
the purchase recommendation with its alternatives. Plans are created over the API or seeded (`make run`);
submission goes through the run service (same claims, progress, cancel, idempotency as every run)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_tables2 import RequestConfig

from accounts.roles import Capability
from accounts.scoping import visible_team_ids
from core.errors import ValidationError
from planning.models import CapacityPlan
from portal.tables import CapacityPlanTable
from portal.views.common import _can, _error_dict, _require, _runs_for
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus
from simulations.services.capacity_plans import capacity_plan_submit

PLANS_PER_PAGE = 50
SERIES = (("productive", "Productive", 2), ("failed", "Lost to failures and repair", 3), ("idle", "Idle", 6))


@login_required
@require_GET
def capacity_plans(request: HttpRequest) -> HttpResponse:
    table = CapacityPlanTable(CapacityPlan.objects.for_request(request).select_related("team").order_by("name", "pk"),
                              plan_teams=set(visible_team_ids(request, Capability.PLAN)))
    RequestConfig(request, paginate={"per_page": PLANS_PER_PAGE}).configure(table)
    return render(request, "portal/capacity_plans.html", {"table": table, "section": "capacity"})


@login_required
@require_POST
def capacity_plan_run(request: HttpRequest, pk: int) -> HttpResponse:
    plan = get_object_or_404(CapacityPlan.objects.for_request(request), pk=pk)
    _require(request, plan.team_id, Capability.PLAN)
    params: dict[str, Any] = {}
    raw = str(request.POST.get("replications", "")).strip()
    if raw:
        params["replications"] = int(raw) if raw.isdigit() and len(raw) < 6 else raw
    try:
        run = capacity_plan_submit(plan=plan, user=request.user, params=params)
    except ValidationError as exc:
        for path, msgs in _error_dict(exc).items():
            messages.error(request, f"{path}: {' '.join(map(str, msgs))}")
        return HttpResponseRedirect(reverse("capacity-plans"))
    if getattr(run, "reused", False):
        messages.info(request, f"Nothing changed since run #{run.pk}; its stored result is shown.")
    return HttpResponseRedirect(reverse("capacity-run", args=[run.pk]))


def utilization_charts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One stacked chart per cluster: productive / lost / idle GPUs per day (P50 over replications), and the
    P10 and P90 of allocated GPUs as dashed lines (the band). Clusters in the plan's order (a JSON column may
    store the timeline's keys in another)."""
    tl = (result.get("summary") or {}).get("timeline") or {}
    planned = [str(c) for c in (result.get("plan") or {}).get("clusters") or [] if str(c) in tl]
    charts = []
    for i, name in enumerate([*planned, *(n for n in tl if n not in planned)]):
        series = tl[name]
        days = len(series["allocated"]["p50"])
        # stacked areas: the first fills down to the axis, each next one down to the one below it
        datasets = [{"label": label, "data": series[key]["p50"], "type": "line", "fill": "origin" if j == 0 else "-1",
                     "fill_alpha": 0.55, "stack": "gpus", "color_index": color, "hidden_point": True}
                    for j, (key, label, color) in enumerate(SERIES)]
        for band, dash in (("p10", "Allocated P10"), ("p90", "Allocated P90")):
            datasets.append({"label": dash, "data": series["allocated"][band], "type": "line", "stack": band,
                             "dashed": True, "hidden_point": True, "color_index": 0})
        charts.append({"id": f"chart-util-{i}", "title": f"{name}: GPUs per day", "type": "line", "stacked": True,
                       "labels": list(range(days)), "datasets": datasets, "format": "int", "x_title": "day",
                       "y_title": "GPUs"})
    return charts


def gantt(first: dict[str, Any], horizon: int) -> list[dict[str, Any]]:
    """Named jobs as bars on the horizon, grouped by cluster: start → end (or the horizon), deadline marker."""
    h = max(float(horizon), 1.0)
    groups: dict[str, list[dict[str, Any]]] = {}
    for j in first.get("jobs") or []:
        if j.get("start_day") is None:
            continue
        start = float(j["start_day"])
        end = float(j["end_day"]) if j.get("end_day") is not None else h
        bar = {"name": j["name"], "gpus": j["gpus"], "start": start, "end": j.get("end_day"),
               "left": round(100 * start / h, 2), "width": round(max(100 * (end - start) / h, 0.3), 2),
               "missed": j.get("deadline_met") is False,
               "deadline": None if j.get("deadline_day") is None or j["deadline_day"] > h
               else round(100 * float(j["deadline_day"]) / h, 2)}
        groups.setdefault(str(j.get("cluster")), []).append(bar)
    return [{"cluster": c, "bars": bars} for c, bars in groups.items()]


@login_required
@require_GET
def capacity_run(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(_runs_for(request).filter(kind=RunKind.FLEET), pk=pk)
    ctx: dict[str, Any] = {"run": run, "section": "capacity", "active": run.status in ACTIVE_STATUSES,
                           "can_plan": _can(request, run.team_id, Capability.PLAN),
                           "plan": (run.input_snapshot or {}).get("capacity_plan") or {}}
    if run.status == RunStatus.SUCCEEDED and isinstance(run.result, dict):
        res = run.result
        ctx.update(summary=res.get("summary") or {}, first=res.get("first") or {}, purchase=res.get("purchase"),
                   charts=utilization_charts(res), info=res.get("plan") or {},
                   gantt=gantt(res.get("first") or {}, int((res.get("plan") or {}).get("horizon_days") or 1)))
    return render(request, "portal/capacity_run.html", ctx)
