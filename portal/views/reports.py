"""Comparison and saved reports: side-by-side tables, charts, exports."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_tables2 import RequestConfig

from accounts.roles import Capability
from core.errors import ValidationError
from core.text import parse_id_list
from planning.services import scenario_document
from portal import charts
from portal.panels import own_configuration_run
from portal.tables import ReportTable
from portal.views.common import _can, _error_dict, _require, _runs_for
from simulations import reports as comparison
from simulations import services as sim_services
from simulations.models import Report, RunStatus, SimulationRun, Sweep
from simulations.selectors import report_list, runs_by_ids

logger = logging.getLogger(__name__)

REPORTS_PER_PAGE = 50


def _compare_runs(request: HttpRequest) -> tuple[list[SimulationRun], SimulationRun | None, Sweep | None]:
    sweep = None
    if request.GET.get("sweep"):
        if not request.GET["sweep"].isdigit():
            raise Http404("No such sweep.")
        sweep = get_object_or_404(Sweep.objects.for_request(request), pk=request.GET["sweep"])
        runs_ = list(sweep.runs.filter(status=RunStatus.SUCCEEDED).order_by("id"))
    else:
        raw = ",".join([request.GET.get("runs") or "", *request.GET.getlist("pick")]).replace(" ", "")
        try:  # the count is checked on the text, before any query (999 ids: a 400 page at once, #23)
            ids = parse_id_list(raw, limit=comparison.MAX_COMPARE_RUNS, what="runs to compare")
        except ValueError as exc:
            raise ValidationError({"runs": [str(exc)]}) from None
        if not ids:
            return [], None, None
        found = {r.pk: r for r in _runs_for(request).filter(pk__in=ids)}
        if len(found) != len(ids):
            raise Http404("No such run.")
        runs_ = [found[i] for i in ids]
    baseline = None
    if request.GET.get("baseline"):
        baseline = next((r for r in runs_ if str(r.pk) == request.GET["baseline"]), None)
        if baseline is None:
            raise Http404("The baseline must be one of the compared runs.")
    elif runs_:
        baseline = _default_baseline(runs_, sweep)
    return runs_, baseline, sweep


def _default_baseline(runs_: list[SimulationRun], sweep: Sweep | None) -> SimulationRun:
    """A sweep compares against the scenario's own configuration when the sweep ran it; else the first run."""
    if sweep is not None and sweep.scenario is not None:
        try:
            own = own_configuration_run(
                [r for r in runs_ if r.status == RunStatus.SUCCEEDED],
                scenario_document(scenario=sweep.scenario))
        except Exception:  # a scenario whose document no longer resolves: fall back to the first run
            logger.exception("scenario_document failed for sweep %s", sweep.pk)
            own = None
        if own is not None:
            return own
    return runs_[0]


def _render_compare(request: HttpRequest, runs_: list[SimulationRun], baseline: SimulationRun | None,
                    sweep: Sweep | None = None, report: Report | None = None) -> HttpResponse:
    recent = []
    table = None
    report_charts = None
    if runs_:
        not_done = [r for r in runs_ if r.status != RunStatus.SUCCEEDED or not r.result]
        ready = [r for r in runs_ if r not in not_done]
        if baseline in not_done:
            baseline = ready[0] if ready else None
        table = charts.comparison_table(ready, baseline) if baseline else None
        report_charts = charts.report_charts(ready, baseline) if ready else None
    else:
        recent = list(_runs_for(request).filter(status=RunStatus.SUCCEEDED).order_by("-created_at")[:20])
        not_done = []
    team_ids = {r.team_id for r in runs_}
    # a comparison can be saved as a report when its runs are in one team where the user may plan
    can_save = report is None and len(team_ids) == 1 and _can(request, next(iter(team_ids)), Capability.PLAN)
    if report is not None:
        query = (f"runs={','.join(str(r.pk) for r in runs_)}" + (f"&baseline={baseline.pk}" if baseline else "")
                 + f"&report={report.pk}")
    else:
        query = request.GET.urlencode()
    return render(request, "portal/compare.html", {
        "runs": runs_, "baseline": baseline, "sweep": sweep, "table": table, "charts": report_charts,
        "not_done": not_done, "recent": recent, "report": report, "can_save": can_save,
        "can_edit_report": report is not None and _can(request, report.team_id, Capability.PLAN),
        "run_ids": ",".join(str(r.pk) for r in runs_),
        "can_export": bool(runs_) and all(_can(request, t, Capability.EXPORT) for t in team_ids),
        "query": query, "print_view": request.GET.get("print") == "1",
    })


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    runs_, baseline, sweep = _compare_runs(request)
    return _render_compare(request, runs_, baseline, sweep)


@login_required
@require_GET
def reports(request: HttpRequest) -> HttpResponse:
    rows = (report_list(request).select_related("baseline__scenario", "team", "created_by")
            .annotate(n_runs=Count("runs", distinct=True)).order_by("-updated_at"))
    table = ReportTable(rows)
    RequestConfig(request, paginate={"per_page": REPORTS_PER_PAGE}).configure(table)
    return render(request, "portal/reports.html", {"table": table})


@login_required
@require_POST
def report_new(request: HttpRequest) -> HttpResponse:
    """Save the comparison being viewed (its runs and baseline) as a named report of the runs' team."""
    raw = [p for p in (request.POST.get("runs") or "").replace(" ", "").split(",") if p]
    if not raw or not all(p.isdigit() for p in raw):
        raise Http404("Bad run list.")
    try:
        runs_ = runs_by_ids(request, list(dict.fromkeys(int(p) for p in raw)))
    except ValidationError:
        raise Http404("No such run.") from None
    team_ids = {r.team_id for r in runs_}
    back = reverse("compare") + "?runs=" + ",".join(str(r.pk) for r in runs_)
    if len(team_ids) != 1:
        messages.error(request, "A report holds the runs of one team; these runs belong to several.")
        return HttpResponseRedirect(back)
    team_id = next(iter(team_ids))
    _require(request, team_id, Capability.PLAN)
    baseline = next((r for r in runs_ if str(r.pk) == request.POST.get("baseline")), runs_[0])
    try:
        report = sim_services.report_create(
            team=runs_[0].team, user=request.user, name=(request.POST.get("name") or "").strip()[:120],
            description=request.POST.get("description") or "", runs=runs_, baseline=baseline,
        )
    except (ValidationError, DjangoValidationError) as exc:
        messages.error(request, "The report was not saved: " + "; ".join(
            f"{k}: {' '.join(map(str, v))}" for k, v in _error_dict(exc).items()))
        return HttpResponseRedirect(back + f"&baseline={baseline.pk}")
    messages.success(request, f"Saved report “{report.name}”.")
    return HttpResponseRedirect(reverse("report-detail", args=[report.pk]))


@login_required
@require_http_methods(["GET", "POST"])
def report_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A saved report: the comparison of its runs against its baseline (POST: rename / new baseline)."""
    report = get_object_or_404(report_list(request).select_related("baseline"), pk=pk)
    runs_ = list(report.runs.select_related("scenario", "sweep").order_by("id"))
    if request.method == "POST":
        _require(request, report.team_id, Capability.PLAN)
        fields: dict[str, Any] = {}
        if "name" in request.POST:
            fields["name"] = (request.POST.get("name") or "").strip()[:120]
        if "description" in request.POST:
            fields["description"] = request.POST.get("description") or ""
        if request.POST.get("baseline"):
            fields["baseline"] = next((r for r in runs_ if str(r.pk) == request.POST["baseline"]), None)
            if fields["baseline"] is None:
                raise Http404("The baseline must be one of the report's runs.")
        try:
            if "name" in fields and not fields["name"]:
                raise ValidationError({"name": ["This field is required."]})
            sim_services.report_update(report=report, user=request.user, **fields)
            messages.success(request, f"Report “{report.name}” saved.")
        except (ValidationError, DjangoValidationError) as exc:
            messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in _error_dict(exc).items()))
        return HttpResponseRedirect(reverse("report-detail", args=[report.pk]))
    baseline: SimulationRun | None = report.baseline
    if request.GET.get("baseline"):  # look at it against another of its runs without saving
        baseline = next((r for r in runs_ if str(r.pk) == request.GET["baseline"]), None)
        if baseline is None:
            raise Http404("The baseline must be one of the report's runs.")
    return _render_compare(request, runs_, baseline, report=report)


@login_required
@require_GET
def compare_export(request: HttpRequest) -> HttpResponse:
    """The comparison on the page as CSV/XLSX/JSON; its file name names every run, the sweep or the saved report
    (``?report=``), never a cut-off list of ids."""
    runs_, baseline, sweep = _compare_runs(request)
    if not runs_:
        raise Http404("Nothing to export.")
    for team_id in {r.team_id for r in runs_}:
        _require(request, team_id, Capability.EXPORT)
    fmt = request.GET.get("format", "csv")
    if fmt not in comparison.EXPORT_FORMATS:
        raise Http404("Unknown export format.")
    ready = [r for r in runs_ if r.status == RunStatus.SUCCEEDED and r.result]
    if not ready:
        raise Http404("None of these runs has a result yet.")
    if baseline not in ready:
        baseline = ready[0]
    report = None
    raw = request.GET.get("report") or ""
    if raw:
        report = get_object_or_404(report_list(request), pk=raw) if raw.isdigit() and len(raw) < 10 else None
        if report is None or {r.pk for r in report.runs.all()} != {r.pk for r in runs_}:
            report = None  # the page's runs are not (or no longer) the report's: name the runs instead
    body, content_type, filename = comparison.export_compare(
        runs=ready, baseline=baseline, fmt=fmt, report=report, sweep_id=sweep.pk if sweep is not None else None)
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
