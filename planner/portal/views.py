"""Portal pages. Thin: read through team-scoped querysets/selectors, write through the domain services,
render templates. Permissions follow the API: reads need ``read`` in the object's team, runs and edits need
``plan`` (403 otherwise), exports need ``export``; another team's object answers 404.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, Prefetch, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from rest_framework import exceptions as drf_exceptions

from accounts.roles import Capability
from accounts.scoping import active_team, has_capability, visible_team_ids
from planner.planning.models import Catalog, CatalogVersion, Fleet, ObjectChange, Scenario
from planner.portal import charts
from planner.portal.forms import FleetForm, ScenarioBuilderForm, SweepForm
from planner.portal.presets import presets_for_js
from simulations.models import ACTIVE_STATUSES, ReEvaluation, Report, RunKind, RunStatus, SimulationRun, Sweep

logger = logging.getLogger(__name__)


# --- helpers ---------------------------------------------------------------------------------------------
def _require(request: HttpRequest, team_id: int | None, capability: str) -> None:
    if not has_capability(request, team_id, capability):
        raise PermissionDenied(f"Your role in this team does not allow '{capability}'.")


def _htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


def _can(request: HttpRequest, team_id: int | None, capability: str) -> bool:
    return has_capability(request, team_id, capability)


def _team_for_create(request: HttpRequest, capability: str = Capability.PLAN) -> Any:
    team = active_team(request, capability)
    if team is None:
        raise PermissionDenied("Your role does not allow this in the active team.")
    return team


def _error_dict(exc: Exception) -> dict[str, Any]:
    """Field errors of a DRF/Django validation error or an engine error, as ``{path: [messages]}``."""
    if isinstance(exc, drf_exceptions.ValidationError):
        from planner.api.errors import flatten_errors

        return flatten_errors(exc.detail)
    if isinstance(exc, DjangoValidationError):
        return exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
    if hasattr(exc, "field"):
        return {str(exc.field): [str(getattr(exc, "message", exc))]}
    return {"detail": [str(exc)]}


def _catalog_items(version: CatalogVersion | None = None) -> list[dict[str, Any]]:
    from planner.planning.services import catalog_resolve, catalog_values

    if version is None:
        version, values = catalog_resolve(catalog=None)
    else:
        values = catalog_values(version=version)
    return list(values.values())


def _runs_for(request: HttpRequest) -> Any:
    return SimulationRun.objects.for_request(request).select_related("scenario", "sweep")


# --- dashboard -------------------------------------------------------------------------------------------
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


# --- catalog ---------------------------------------------------------------------------------------------
CATALOG_KIND_LABELS = [
    ("gpu", "GPUs"), ("server", "Servers"), ("nic", "NICs"), ("switch", "Switches"),
    ("transceiver", "Optics"), ("cable", "Cables"), ("facility", "Facility"), ("reliability", "Reliability"),
]
SORTS = {"key", "name", "unit_price_usd", "power_w"}
SPEC_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "gpu": [("bf16_dense_tflops", "BF16 TFLOP/s"), ("fp8_dense_tflops", "FP8 TFLOP/s"), ("hbm_gb", "HBM GB"),
            ("nvlink_gbytes_per_s", "NVLink GB/s")],
    "server": [("gpu", "GPU"), ("gpus_per_server", "GPUs"), ("nodes_per_rack", "Per rack")],
    "nic": [("gbps", "Gb/s"), ("ports", "Ports"), ("form", "Form"), ("fabrics", "Fabrics")],
    "switch": [("fabric", "Fabric"), ("radix", "Radix"), ("port_gbps", "Port Gb/s"), ("switching_tbps", "Tb/s")],
    "transceiver": [("gbps", "Gb/s"), ("links", "Links"), ("media", "Media"), ("reach", "Reach")],
    "cable": [("gbps", "Gb/s"), ("links", "Links"), ("media", "Media"), ("max_m", "Max m")],
    "facility": [("usd_per_kwh", "$/kWh"), ("pue", "PUE"), ("depreciation_years", "Depr. years")],
    "reliability": [("component", "Component"), ("rate_per_unit_day", "Rate / unit·day")],
}


@login_required
@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    catalogs = list(Catalog.objects.for_request(request).order_by("team_id", "name"))
    selected = None
    if request.GET.get("catalog"):
        selected = next((c for c in catalogs if str(c.pk) == request.GET["catalog"]), None)
        if selected is None:
            raise Http404("No such catalog.")
    elif catalogs:
        selected = next((c for c in catalogs if c.team_id is None), catalogs[0])
    versions = list(selected.versions.select_related("created_by").order_by("-number")) if selected else []
    version = versions[0] if versions else None
    if request.GET.get("version") and versions:
        version = next((v for v in versions if str(v.number) == request.GET["version"]), None)
        if version is None:
            raise Http404("No such version.")
    from planner.planning.selectors import catalog_items_for_display

    items = catalog_items_for_display(version)
    counts: dict[str, int] = {}
    for item in items:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    kind = request.GET.get("kind") or "gpu"
    q = (request.GET.get("q") or "").strip().lower()
    rows = [i for i in items if i["kind"] == kind]
    if q:
        rows = [i for i in rows if q in f"{i['key']} {i['name']} {i.get('source', '')}".lower()]
    sort = request.GET.get("sort") or "key"
    field = sort.lstrip("-")
    if field in SORTS:
        present = [r for r in rows if r.get(field) is not None]
        missing = [r for r in rows if r.get(field) is None]
        present.sort(key=lambda r: (r[field].lower() if isinstance(r[field], str) else r[field]),
                     reverse=sort.startswith("-"))
        rows = present + missing
    spec_cols = SPEC_COLUMNS.get(kind, [])
    for r in rows:
        specs = r.get("specs") or {}
        r["spec_values"] = [", ".join(map(str, v)) if isinstance(v, list) else v
                            for v in (specs.get(k) for k, _ in spec_cols)]
    history = _version_history(selected, versions) if selected else []
    return render(request, "portal/catalog.html", {
        "catalogs": catalogs, "selected": selected, "versions": versions, "version": version,
        "kinds": [(k, label, counts.get(k, 0)) for k, label in CATALOG_KIND_LABELS if counts.get(k)],
        "kind": kind, "q": request.GET.get("q", ""), "sort": sort, "rows": rows, "spec_cols": spec_cols,
        "history": history, "builtin": version is None,
        "can_edit": selected is not None and selected.team_id is not None
        and _can(request, selected.team_id, Capability.CATALOG),
        "can_fork": bool(visible_team_ids(request, Capability.CATALOG)),
    })


def _version_history(selected: Catalog, versions: list[CatalogVersion]) -> list[dict[str, Any]]:
    """Each version with the item changes the change log recorded for it (newest first)."""
    changes = ObjectChange.objects.filter(object_type="catalog", object_id=selected.pk).order_by("-time")
    by_version: dict[int, ObjectChange] = {}
    for ch in changes:
        after = ch.postchange or {}
        number = after.get("version") if isinstance(after, dict) else None
        diff = ch.diff or {}
        if number is None and isinstance(diff.get("version"), dict):
            number = diff["version"].get("after")
        if isinstance(number, int) and number not in by_version:
            by_version[number] = ch
    out = []
    for v in versions[:20]:
        found = by_version.get(v.number)
        items = []
        if found is not None:
            for path, change in sorted((found.diff or {}).items()):
                if not path.startswith("items."):
                    continue
                before, after = (change or {}).get("before"), (change or {}).get("after")
                items.append(_item_change(path[len("items."):], before, after))
        initial = v == versions[-1] and items and all(c["action"] == "added" for c in items)
        if initial:  # the first version adds everything: a count says more than a list
            out.append({"version": v, "changes": [], "more": 0, "initial_count": len(items)})
            continue
        out.append({"version": v, "changes": items[:40], "more": max(0, len(items) - 40)})
    return out


def _item_change(key: str, before: Any, after: Any) -> dict[str, Any]:
    if before is None:
        return {"key": key, "action": "added", "fields": []}
    if after is None:
        return {"key": key, "action": "removed", "fields": []}
    fields = []
    for f in ("name", "unit_price_usd", "power_w", "source"):
        if before.get(f) != after.get(f):
            fields.append({"field": f, "before": before.get(f), "after": after.get(f)})
    b_specs, a_specs = before.get("specs") or {}, after.get("specs") or {}
    for f in sorted(set(b_specs) | set(a_specs)):
        if b_specs.get(f) != a_specs.get(f):
            fields.append({"field": f"specs.{f}", "before": b_specs.get(f), "after": a_specs.get(f)})
    return {"key": key, "action": "changed", "fields": fields}


@login_required
@require_POST
def catalog_fork(request: HttpRequest, pk: int) -> HttpResponse:
    from planner.planning import services

    source = get_object_or_404(Catalog.objects.for_request(request), pk=pk)
    team = _team_for_create(request, Capability.CATALOG)
    try:
        fork = services.catalog_fork(catalog=source, team=team, user=request.user)
    except (drf_exceptions.ValidationError, DjangoValidationError) as exc:
        messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in _error_dict(exc).items()))
        return HttpResponseRedirect(reverse("catalog") + f"?catalog={source.pk}")
    messages.success(request, f"Forked {source.name} into {fork.name}. Prices you edit there apply to your team only.")
    return HttpResponseRedirect(reverse("catalog") + f"?catalog={fork.pk}")


# --- fleets ----------------------------------------------------------------------------------------------
@login_required
@require_GET
def fleets(request: HttpRequest) -> HttpResponse:
    rows = list(Fleet.objects.for_request(request).select_related("team").annotate(n_scenarios=Count("scenarios"))
                .order_by("name"))
    return render(request, "portal/fleets.html", {
        "fleets": rows,
        "gpu_total": sum(f.gpus for f in rows),
        "can_plan": active_team(request, Capability.PLAN) is not None,
        "plan_teams": set(visible_team_ids(request, Capability.PLAN)),
    })


@login_required
@require_http_methods(["GET", "POST"])
def fleet_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    from planner.planning import services

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
        except (drf_exceptions.ValidationError, DjangoValidationError) as exc:
            form.add_path_errors(_error_dict(exc))
    status = 400 if request.method == "POST" else 200
    return render(request, "portal/fleet_form.html", {"form": form, "fleet": fleet, "team": team}, status=status)


# --- scenarios -------------------------------------------------------------------------------------------
@login_required
@require_GET
def scenarios(request: HttpRequest) -> HttpResponse:
    last_run = SimulationRun.objects.filter(sweep__isnull=True).order_by("-created_at")
    rows = list(
        Scenario.objects.for_request(request)
        .select_related("workload", "fleet", "team")
        .prefetch_related(Prefetch("runs", queryset=last_run, to_attr="recent_runs"))
        .order_by("-updated_at")
    )
    for s in rows:
        s.last_run = s.recent_runs[0] if s.recent_runs else None
        s.cluster_summary = charts.cluster_summary(s)
    return render(request, "portal/scenarios.html", {
        "scenarios": rows,
        "can_plan": active_team(request, Capability.PLAN) is not None,
        "plan_teams": set(visible_team_ids(request, Capability.PLAN)),
    })


def _validate_document(form: ScenarioBuilderForm, catalog_values: Mapping[str, Any]) -> bool:
    """Validate with the same service (and so the same rules) as the API; errors go on the right field."""
    from planner.planning.services import document_validate

    try:
        document_validate(document=form.document(), catalog=catalog_values or None)
    except drf_exceptions.ValidationError as exc:
        form.add_path_errors(_error_dict(exc))
        return False
    return True


def _fleet_choices(fleets: Any, values: Mapping[str, Any]) -> list[tuple[Fleet, dict[str, Any]]]:
    """(fleet, the engine cluster it stands for) for the builder's fleet picker."""
    from planner.planning.services import fleet_cluster

    return [(f, fleet_cluster(fleet=f, catalog=values)) for f in fleets.order_by("name")]


@login_required
@require_http_methods(["GET", "POST"])
def scenario_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    from planner.planning import services

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
    )
    if request.method == "POST" and form.is_valid() and _validate_document(form, values):
        d = form.cleaned_data
        try:
            saved = services.scenario_save(
                team=team, user=request.user, scenario=scenario, name=d["name"], description=d["description"],
                workload_name=form.workload_name(), model=form.model_doc(), training=form.training_doc(),
                parallelism=form.parallelism_doc(), cluster=form.cluster_doc(), costs=form.costs_doc(),
                uncertainty=form.uncertainty_doc(), fleet=form.selected_fleet(), watched=d["watched"],
            )
        except (drf_exceptions.ValidationError, DjangoValidationError) as exc:
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
    from planner.planning import services

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
    )
    form.fields["name"].required = False  # an estimate needs no name
    ctx: dict[str, Any] = {"errors": [], "estimate": None}
    if form.is_valid() and _validate_document(form, values):
        try:
            from simulations import services as sim_services

            result = sim_services.preview(document=form.document(), catalog=values)
            ctx["estimate"] = charts.estimate(result)
        except Exception as exc:  # engine/validation errors show in the panel, not as a 500
            if not isinstance(exc, ValueError | drf_exceptions.ValidationError | DjangoValidationError):
                logger.exception("preview failed")
            ctx["errors"] = [f"{k}: {' '.join(map(str, v))}" if k != "detail" else " ".join(map(str, v))
                             for k, v in _error_dict(exc).items()]
    else:
        for name, errs in form.errors.items():
            label = form.fields[name].label if name in form.fields else ""
            ctx["errors"] += [f"{label}: {e}" if label else str(e) for e in errs]
    return render(request, "portal/_estimate.html", ctx)


@login_required
@require_GET
def scenario_detail(request: HttpRequest, pk: int) -> HttpResponse:
    from planner.planning import services

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
    changes = ObjectChange.objects.filter(object_type="scenario", object_id=scenario.pk).order_by("-time")[:10]
    return render(request, "portal/scenario_detail.html", {
        "scenario": scenario, "document": document, "runs": runs, "sweeps": sweeps, "reevals": reevals,
        "latest": latest, "latest_metrics": charts.run_metrics(latest) if latest else None,
        "changes": changes, "can_plan": _can(request, scenario.team_id, Capability.PLAN),
        "sweep_form": SweepForm(catalog_items=_catalog_items()),
        "any_active": any(r.status in ACTIVE_STATUSES for r in runs),
    })


@login_required
@require_POST
def scenario_run(request: HttpRequest, pk: int) -> HttpResponse:
    from simulations import services as sim_services

    scenario = get_object_or_404(Scenario.objects.for_request(request), pk=pk)
    _require(request, scenario.team_id, Capability.PLAN)
    kind = request.POST.get("kind") or RunKind.TCO
    if kind not in RunKind.values:
        kind = RunKind.TCO
    try:
        params = {"monte_carlo": SweepForm.MONTE_CARLO_SAMPLES, "sensitivity": True} if kind == RunKind.TCO else {}
        run = sim_services.run_submit(scenario=scenario, user=request.user, kind=kind, params=params,
                                      force=bool(request.POST.get("force")))
    except (drf_exceptions.ValidationError, DjangoValidationError, ValueError) as exc:
        messages.error(request, "Could not start the run: " + "; ".join(
            f"{k}: {' '.join(map(str, v))}" for k, v in _error_dict(exc).items()))
        return HttpResponseRedirect(reverse("scenario-detail", args=[scenario.pk]))
    if getattr(run, "reused", False):
        messages.info(request, f"Nothing changed since run #{run.pk}; its stored result is shown.")
    else:
        messages.success(request, f"Run #{run.pk} queued.")
    return HttpResponseRedirect(reverse("run-detail", args=[run.pk]))


@login_required
@require_POST
def scenario_sweep(request: HttpRequest, pk: int) -> HttpResponse:
    from simulations import services as sim_services

    scenario = get_object_or_404(Scenario.objects.for_request(request), pk=pk)
    _require(request, scenario.team_id, Capability.PLAN)
    form = SweepForm(request.POST, catalog_items=_catalog_items())
    if form.is_valid():
        try:
            sweep = sim_services.sweep_submit(scenario=scenario, axes=form.axes(), user=request.user,
                                              name=form.cleaned_data.get("name") or "", params=form.params())
            messages.success(request, f"Sweep #{sweep.pk} queued: {sweep.total_runs} runs.")
            return HttpResponseRedirect(reverse("sweep-detail", args=[sweep.pk]))
        except (drf_exceptions.ValidationError, DjangoValidationError, ValueError) as exc:
            form.add_path_errors(_error_dict(exc))
    return render(request, "portal/sweep_form.html", {"form": form, "scenario": scenario}, status=400)


# --- runs ------------------------------------------------------------------------------------------------
RUN_FILTERS = {"active": list(ACTIVE_STATUSES), "succeeded": [RunStatus.SUCCEEDED], "failed": [RunStatus.FAILED],
               "cancelled": [RunStatus.CANCELLED]}


@login_required
@require_GET
def runs(request: HttpRequest) -> HttpResponse:
    qs = _runs_for(request).order_by("-created_at")
    status = request.GET.get("status", "")
    if status in RUN_FILTERS:
        qs = qs.filter(status__in=RUN_FILTERS[status])
    if request.GET.get("scenario"):
        if not request.GET["scenario"].isdigit():
            raise Http404("No such scenario.")
        qs = qs.filter(scenario_id=request.GET["scenario"])
    rows = list(qs[:100])
    sweeps = list(Sweep.objects.for_request(request).select_related("scenario")
                  .annotate(done=Count("runs", filter=Q(runs__status__in=[RunStatus.SUCCEEDED, RunStatus.FAILED,
                                                                           RunStatus.CANCELLED])))
                  .order_by("-created_at")[:10])
    ctx = {
        "runs": rows, "sweeps": sweeps, "status": status,
        "any_active": any(r.status in ACTIVE_STATUSES for r in rows)
        or any(s.status in ACTIVE_STATUSES for s in sweeps),
        "plan_teams": set(visible_team_ids(request, Capability.PLAN)),
    }
    if _htmx(request) and request.GET.get("partial") == "table":
        return render(request, "portal/_runs_live.html", ctx)
    return render(request, "portal/runs.html", ctx)


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(_runs_for(request).select_related("catalog_version__catalog"), pk=pk)
    ctx = {
        "run": run, "metrics": charts.run_metrics(run) if run.result else None,
        "can_plan": _can(request, run.team_id, Capability.PLAN),
        "can_export": _can(request, run.team_id, Capability.EXPORT),
        "report_charts": charts.report_charts([run]) if run.result else None,
    }
    if _htmx(request) and request.GET.get("partial") == "status":
        return render(request, "portal/_run_status.html", ctx)
    return render(request, "portal/run_detail.html", ctx)


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    from simulations import services as sim_services

    run = get_object_or_404(_runs_for(request), pk=pk)
    _require(request, run.team_id, Capability.PLAN)
    try:
        sim_services.run_cancel(run=run, user=request.user)
        messages.success(request, f"Run #{run.pk}: cancellation requested.")
    except (drf_exceptions.ValidationError, DjangoValidationError, ValueError) as exc:
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


# --- comparison / reports --------------------------------------------------------------------------------
def _compare_runs(request: HttpRequest) -> tuple[list[SimulationRun], SimulationRun | None, Sweep | None]:
    sweep = None
    if request.GET.get("sweep"):
        if not request.GET["sweep"].isdigit():
            raise Http404("No such sweep.")
        sweep = get_object_or_404(Sweep.objects.for_request(request), pk=request.GET["sweep"])
        runs_ = list(sweep.runs.filter(status=RunStatus.SUCCEEDED).order_by("id"))
    else:
        ids = [p for p in (request.GET.get("runs") or "").replace(" ", "").split(",") if p]
        ids += [p for p in request.GET.getlist("pick") if p]
        if not ids:
            return [], None, None
        if not all(p.isdigit() for p in ids):
            raise Http404("Bad run list.")
        found = {r.pk: r for r in _runs_for(request).filter(pk__in=ids)}
        if len(found) != len(set(ids)):
            raise Http404("No such run.")
        runs_ = [found[int(p)] for p in dict.fromkeys(ids)]
    baseline = None
    if request.GET.get("baseline"):
        baseline = next((r for r in runs_ if str(r.pk) == request.GET["baseline"]), None)
        if baseline is None:
            raise Http404("The baseline must be one of the compared runs.")
    elif runs_:
        baseline = runs_[0]
    return runs_, baseline, sweep


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
        report_charts = charts.report_charts(ready) if ready else None
    else:
        recent = list(_runs_for(request).filter(status=RunStatus.SUCCEEDED).order_by("-created_at")[:20])
        not_done = []
    team_ids = {r.team_id for r in runs_}
    # a comparison can be saved as a report when its runs are in one team where the user may plan
    can_save = report is None and len(team_ids) == 1 and _can(request, next(iter(team_ids)), Capability.PLAN)
    if report is not None:
        query = f"runs={','.join(str(r.pk) for r in runs_)}" + (f"&baseline={baseline.pk}" if baseline else "")
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


# --- saved reports ---------------------------------------------------------------------------------------
@login_required
@require_GET
def reports(request: HttpRequest) -> HttpResponse:
    from simulations.selectors import report_list

    rows = list(report_list(request).select_related("baseline", "team", "created_by").order_by("-updated_at"))
    return render(request, "portal/reports.html", {"reports": rows})


@login_required
@require_POST
def report_new(request: HttpRequest) -> HttpResponse:
    """Save the comparison being viewed (its runs and baseline) as a named report of the runs' team."""
    from simulations import services as sim_services
    from simulations.selectors import runs_by_ids

    raw = [p for p in (request.POST.get("runs") or "").replace(" ", "").split(",") if p]
    if not raw or not all(p.isdigit() for p in raw):
        raise Http404("Bad run list.")
    try:
        runs_ = runs_by_ids(request, list(dict.fromkeys(int(p) for p in raw)))
    except drf_exceptions.ValidationError:
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
    except (drf_exceptions.ValidationError, DjangoValidationError) as exc:
        messages.error(request, "The report was not saved: " + "; ".join(
            f"{k}: {' '.join(map(str, v))}" for k, v in _error_dict(exc).items()))
        return HttpResponseRedirect(back + f"&baseline={baseline.pk}")
    messages.success(request, f"Saved report “{report.name}”.")
    return HttpResponseRedirect(reverse("report-detail", args=[report.pk]))


@login_required
@require_http_methods(["GET", "POST"])
def report_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A saved report: the comparison of its runs against its baseline (POST: rename / new baseline)."""
    from simulations import services as sim_services
    from simulations.selectors import report_list

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
                raise drf_exceptions.ValidationError({"name": ["This field is required."]})
            sim_services.report_update(report=report, user=request.user, **fields)
            messages.success(request, f"Report “{report.name}” saved.")
        except (drf_exceptions.ValidationError, DjangoValidationError) as exc:
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
    from simulations import reports

    runs_, baseline, _ = _compare_runs(request)
    if not runs_:
        raise Http404("Nothing to export.")
    for team_id in {r.team_id for r in runs_}:
        _require(request, team_id, Capability.EXPORT)
    fmt = request.GET.get("format", "csv")
    ready = [r for r in runs_ if r.status == RunStatus.SUCCEEDED and r.result]
    if not ready:
        raise Http404("None of these runs has a result yet.")
    if baseline not in ready:
        baseline = ready[0]
    return charts.export_response(reports, runs=ready, baseline=baseline, fmt=fmt)


# --- re-evaluations --------------------------------------------------------------------------------------
@login_required
@require_GET
def reevaluations(request: HttpRequest) -> HttpResponse:
    rows = list(
        ReEvaluation.objects.for_request(request)
        .select_related("scenario", "previous_run", "new_run")
        .order_by("-created_at")[:100]
    )
    for r in rows:
        r.change_rows = charts.reevaluation_changes(r.changes)
    watched = Scenario.objects.for_request(request).filter(watched=True).count()
    return render(request, "portal/reevaluations.html", {"rows": rows, "watched_count": watched})
