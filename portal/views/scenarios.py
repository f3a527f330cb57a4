"""Scenario pages: list, builder, live preview, detail, run and sweep."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_tables2 import RequestConfig

from accounts.roles import Capability
from accounts.scoping import active_team, visible_team_ids
from core.errors import ValidationError
from planning import services
from planning.models import Fleet, ObjectChange, Scenario
from planning.services import document_validate, fleet_cluster
from portal import charts, panels
from portal.forms import ScenarioBuilderForm, SweepForm
from portal.presets import presets_for_js
from portal.tables import ScenarioTable
from portal.views.common import _can, _catalog_items, _error_dict, _require, _team_for_create
from simulations import services as sim_services
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, SimulationRun
from simulations.services import advice as advice_services

logger = logging.getLogger(__name__)

SCENARIOS_PER_PAGE = 50


@login_required
@require_GET
def scenarios(request: HttpRequest) -> HttpResponse:
    last_run = SimulationRun.objects.filter(sweep__isnull=True).order_by("-created_at")
    rows = (Scenario.objects.for_request(request).select_related("workload", "fleet", "team")
            .prefetch_related(Prefetch("runs", queryset=last_run, to_attr="recent_runs")).order_by("-updated_at"))
    server_gpus = {i["key"]: (i.get("specs") or {}).get("gpu") for i in _catalog_items() if i.get("kind") == "server"}
    table = ScenarioTable(rows, server_gpus=server_gpus, plan_teams=set(visible_team_ids(request, Capability.PLAN)))
    RequestConfig(request, paginate={"per_page": SCENARIOS_PER_PAGE}).configure(table)
    return render(request, "portal/scenarios.html", {
        "table": table, "can_plan": active_team(request, Capability.PLAN) is not None,
    })


def _validate_document(form: ScenarioBuilderForm, catalog_values: Mapping[str, Any]) -> Any:
    """Validate with the same service (and so the same rules) as the API; errors go on the right field.

    Returns the engine's parsed scenario (opaque here: views never handle engine types; None when invalid), so
    the estimate does not parse it again."""
    try:
        return document_validate(document=form.document(), catalog=catalog_values or None)
    except ValidationError as exc:
        form.add_path_errors(_error_dict(exc))
        return None


def _fleet_choices(fleets: Any, values: Mapping[str, Any]) -> list[tuple[Fleet, dict[str, Any]]]:
    """(fleet, the engine cluster it stands for) for the builder's fleet picker."""
    return [(f, fleet_cluster(fleet=f, catalog=values)) for f in fleets.order_by("name")]


@login_required
@require_http_methods(["GET", "POST"])
def scenario_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    scenario = None
    if pk is not None:
        scenario = get_object_or_404(
            Scenario.objects.for_request(request).select_related("workload", "fleet", "team"), pk=pk)
        _require(request, scenario.team_id, Capability.PLAN)
        team = scenario.team
        version, values = services.catalog_resolve(catalog=scenario.catalog, pinned_version=scenario.pinned_version)
        initial = ScenarioBuilderForm.initial_from_document(
            services.scenario_document(scenario=scenario), name=scenario.name,
            description=scenario.description, watched=scenario.watched, fleet=scenario.fleet, catalog=values,
        )
    else:
        team = _team_for_create(request)
        version, values = services.catalog_resolve(catalog=None)
        initial = {}
    fleets = _fleet_choices(Fleet.objects.filter(team=team), values)
    form = ScenarioBuilderForm(
        request.POST or None, initial=initial, catalog_items=values.values(), fleets=fleets,
        base_costs=scenario.costs if scenario else None, base_uncertainty=scenario.uncertainty if scenario else None,
        base=services.scenario_sections(scenario=scenario) if scenario else None,
    )
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:  # scenario_save validates the document it writes (the engine's parser, once): errors name the field
            saved = services.scenario_save(
                team=team, user=request.user, scenario=scenario, name=d["name"], description=d["description"],
                workload_name=form.workload_name(), model=form.model_doc(), training=form.training_doc(),
                parallelism=form.parallelism_doc(), cluster=form.cluster_doc(), costs=form.costs_doc(),
                uncertainty=form.uncertainty_doc(), fleet=form.selected_fleet(), watched=d["watched"],
            )
        except (ValidationError, DjangoValidationError) as exc:
            form.add_path_errors(_error_dict(exc))
        else:
            if scenario is None:
                messages.success(request, f"Scenario “{saved.name}” created. Run it to get full results.")
            else:
                messages.success(request, f"Scenario “{saved.name}” saved.")
            return HttpResponseRedirect(reverse("scenario-detail", args=[saved.pk]))
    status = 400 if request.method == "POST" else 200
    return render(request, "portal/scenario_builder.html", {
        "form": form, "scenario": scenario, "team": team, "catalog_version": version,
        "presets": presets_for_js(), "fleet_clusters": form.fleet_clusters,
    }, status=status)


@login_required
@require_POST
def scenario_preview(request: HttpRequest) -> HttpResponse:
    """htmx partial: the live estimate for the builder's current input (nothing is saved)."""
    scenario_id = request.POST.get("scenario_id") or ""
    scenario = (Scenario.objects.for_request(request).filter(pk=scenario_id).first()
                if scenario_id.isdigit() else None)
    if scenario is not None:  # editing: same catalog and the cost keys the builder does not show
        _version, values = services.catalog_resolve(catalog=scenario.catalog,
                                                    pinned_version=scenario.pinned_version)
    else:
        _version, values = services.catalog_resolve(catalog=None)
    fleet_id = request.POST.get("fleet") or ""
    fleets = Fleet.objects.for_request(request).filter(pk=fleet_id) if fleet_id.isdigit() else Fleet.objects.none()
    form = ScenarioBuilderForm(
        request.POST, catalog_items=values.values(), fleets=_fleet_choices(fleets, values),
        base_costs=scenario.costs if scenario else None, base_uncertainty=scenario.uncertainty if scenario else None,
        base=services.scenario_sections(scenario=scenario) if scenario else None,
    )
    form.fields["name"].required = False  # an estimate needs no name
    ctx: dict[str, Any] = {"errors": [], "estimate": None}
    parsed = _validate_document(form, values) if form.is_valid() else None
    dead_end = False
    if parsed is not None:
        try:  # the document validation parsed: the estimate runs on that
            result = sim_services.preview(document=parsed, catalog=values)
            ctx["estimate"] = charts.estimate(result)
        except Exception as exc:  # engine/validation errors show in the panel, not as a 500
            dead_end = advice_services.is_dead_end_error(exc)
            if not isinstance(exc, ValueError | ValidationError | DjangoValidationError):
                logger.exception("preview failed")
            ctx["errors"] = [f"{k}: {' '.join(map(str, v))}" if k != "detail" else " ".join(map(str, v))
                             for k, v in _error_dict(exc).items()]
    else:
        for name, errs in form.errors.items():
            label = form.fields[name].label if name in form.fields else ""
            ctx["errors"] += [f"{label}: {e}" if label else str(e) for e in errs]
    if dead_end and hasattr(form, "cleaned_data"):
        try:
            ctx["advice"] = advice_services.gpu_count_advice(document=form.document(), catalog=values)
        except (KeyError, TypeError, ValueError):
            ctx["advice"] = None
    return render(request, "portal/_estimate.html", ctx)


@login_required
@require_GET
def scenario_detail(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(
        Scenario.objects.for_request(request).select_related("workload", "fleet", "catalog", "team"), pk=pk
    )
    try:
        document = services.scenario_document(scenario=scenario)
    except Exception:  # a broken document is shown as such; the run will report the field
        logger.exception("scenario_document failed")
        document = {}
    runs = list(scenario.runs.filter(sweep__isnull=True).order_by("-created_at")[:10])
    sweeps = list(scenario.sweeps.order_by("-created_at")[:10])
    reevals = list(scenario.reevaluations.order_by("-created_at")[:5])
    latest = next((r for r in runs if r.status == RunStatus.SUCCEEDED and r.result), None)
    last_done = next((r for r in runs if r.is_terminal), None)
    # the newest finished run decides the warning: a refused (does-not-fit) run after a good one still warns
    latest_fit = panels.fit_problem(last_done) if last_done is not None else None
    changes = ObjectChange.objects.filter(object_type="scenario", object_id=scenario.pk).order_by("-time")[:10]
    return render(request, "portal/scenario_detail.html", {
        "scenario": scenario, "document": document, "runs": runs, "sweeps": sweeps, "reevals": reevals,
        "latest": latest, "latest_metrics": charts.run_metrics(latest) if latest else None,
        "latest_fit": latest_fit, "latest_fit_run": last_done if latest_fit else None,
        "changes": changes, "can_plan": _can(request, scenario.team_id, Capability.PLAN),
        "sweep_form": SweepForm(catalog_items=_catalog_items()),
        "any_active": any(r.status in ACTIVE_STATUSES for r in runs),
    })


@login_required
@require_POST
def scenario_run(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(Scenario.objects.for_request(request), pk=pk)
    _require(request, scenario.team_id, Capability.PLAN)
    kind = request.POST.get("kind") or RunKind.TCO
    if kind not in RunKind.values:
        kind = RunKind.TCO
    try:
        params = {"monte_carlo": SweepForm.MONTE_CARLO_SAMPLES, "sensitivity": True} if kind == RunKind.TCO else {}
        run = sim_services.run_submit(scenario=scenario, user=request.user, kind=kind, params=params,
                                      force=bool(request.POST.get("force")))
    except (ValidationError, DjangoValidationError, ValueError) as exc:
        messages.error(request, "Could not start the run: " + "; ".join(
            f"{k}: {' '.join(map(str, v))}" for k, v in _error_dict(exc).items()))
        return HttpResponseRedirect(reverse("scenario-detail", args=[scenario.pk]))
    if getattr(run, "reused", False):
        messages.info(request, f"Nothing changed since run #{run.pk}; its stored result is shown.")
    # a new run needs no message: its page shows it queued, then running, then the results (live)
    return HttpResponseRedirect(reverse("run-detail", args=[run.pk]))


@login_required
@require_POST
def scenario_sweep(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(Scenario.objects.for_request(request), pk=pk)
    _require(request, scenario.team_id, Capability.PLAN)
    form = SweepForm(request.POST, catalog_items=_catalog_items())
    if form.is_valid():
        try:
            sweep = sim_services.sweep_submit(scenario=scenario, axes=form.axes(), user=request.user,
                                              name=form.cleaned_data.get("name") or "", params=form.params())
            messages.success(request, f"Sweep #{sweep.pk} queued: {sweep.total_runs} runs.")
            return HttpResponseRedirect(reverse("sweep-detail", args=[sweep.pk]))
        except (ValidationError, DjangoValidationError, ValueError) as exc:
            form.add_path_errors(_error_dict(exc))
    return render(request, "portal/sweep_form.html", {"form": form, "scenario": scenario}, status=400)
