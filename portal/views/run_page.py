"""The run page's live block and the run export.

``run_context`` builds everything the run page shows for a run — status, the does-not-fit warning, the
dead-end advice, headline figures, chart, layout panel, uncertainty note — so the full page and the htmx
partial it polls render the same thing: when the run finishes, one swap brings every result in, and the
polling, the cancel button and the "queued" state go away.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from accounts.roles import Capability
from portal import charts, panels
from portal.views.common import _can, _require, _runs_for
from simulations import reports
from simulations.models import RunStatus, SimulationRun
from simulations.services.advice import run_advice


def run_context(request: HttpRequest, run: SimulationRun) -> dict[str, Any]:
    has_result = bool(run.result) and run.status == RunStatus.SUCCEEDED
    metrics = charts.run_metrics(run) if has_result else None
    return {
        "run": run,
        "metrics": metrics,
        "error_bands": any(m["band"] for m in metrics or []),
        "can_plan": _can(request, run.team_id, Capability.PLAN),
        "can_export": _can(request, run.team_id, Capability.EXPORT),
        "breakdown": charts.step_breakdown(run) if has_result else None,
        "fit": panels.fit_problem(run),
        "layout": panels.layout_panel(run) if has_result else None,
        "fabric": panels.fabric_panel(run) if has_result else None,
        "uncertainty": panels.uncertainty_note(run.result) if has_result else None,
        "advice": run_advice(run=run),
        # the cost line items as the exports state them: exact cents, totals = the headline capex / opex / TCO
        "costs": reports.cost_statement(run.result) if has_result else None,
    }


@login_required
@require_GET
def run_export(request: HttpRequest, pk: int) -> HttpResponse:
    """One run as CSV/XLSX/JSON: its headline figures (does-it-fit first) and its cost line items."""
    run = get_object_or_404(_runs_for(request), pk=pk)
    _require(request, run.team_id, Capability.EXPORT)
    if run.status != RunStatus.SUCCEEDED or not run.result:
        raise Http404("This run has no result yet.")
    fmt = request.GET.get("format", "csv")
    if fmt not in reports.EXPORT_FORMATS:
        raise Http404("Unknown export format.")
    body, content_type, filename = reports.export_run(run=run, fmt=fmt)
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
