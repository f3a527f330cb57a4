"""Fleet calibration page (issues #16, #23, #24): upload measurements (several files at once, with an optional
manifest), fit, predicted vs measured, fitted values.

Uploads and fits are jobs on a worker: the page lists each file's import (status, progress, the refused line) and
the latest fits, and polls while one runs; when none runs any more it reloads itself (the new profile, summaries).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts.roles import Capability
from core.errors import ValidationError
from core.text import JSONTextError, loads_json
from planning import services as planning
from planning.models import CalibrationProfile, CalibrationUpload, Fleet, Scenario
from planning.services import calibration as services
from portal.views.common import _can, _error_dict, _htmx, _require
from simulations.models import ACTIVE_STATUSES, JobKind
from simulations.services.calibration import calibration_fit_submit, fleet_jobs, jobs_by_id
from simulations.services.calibration_batch import (
    MAX_BATCH_FILES,
    calibration_batch_plan,
    calibration_batch_submit,
    max_batch_bytes,
    read_batch_files,
)

MAX_CURVES = 8


def _size_label(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def curve_charts(profile_doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One chart spec per nccl-tests file: measured bus bandwidth over the model's curve before and after."""
    charts: list[dict[str, Any]] = []
    for c in profile_doc.get("collectives", []):
        for src in c.get("sources", [])[:MAX_CURVES]:
            curve = src["curve"]
            oop = [i for i, ip in enumerate(curve["in_place"]) if not ip] or list(range(len(curve["size_bytes"])))
            labels = [_size_label(curve["size_bytes"][i]) for i in oop]
            charts.append({
                "id": f"chart-nccl-{len(charts)}",
                "title": f"{c['collective']} · {src['ranks']} ranks · {src.get('label') or ''}",
                "type": "line", "labels": labels, "format": "num", "x_title": "message size",
                "y_title": "bus bandwidth (GB/s)",
                "datasets": [
                    {"label": "measured", "data": [curve["measured_busbw_gbytes_s"][i] for i in oop]},
                    {"label": "model before calibration", "data": [curve["model_busbw_gbytes_s"][i] for i in oop]},
                    {"label": "model after calibration", "data": [curve["calibrated_busbw_gbytes_s"][i] for i in oop]},
                ],
            })
    return charts


def step_chart(profile_doc: dict[str, Any]) -> dict[str, Any] | None:
    runs = profile_doc.get("runs", [])
    if not runs:
        return None
    return {"id": "chart-steps", "title": "Step time per run: measured vs predicted", "type": "bar",
            "labels": [r["id"] for r in runs], "format": "s", "y_title": "seconds per step",
            "datasets": [
                {"label": "measured", "data": [r["measured_step_time_s"] for r in runs]},
                {"label": "predicted before calibration", "data": [r["predicted_before_s"] for r in runs]},
                {"label": "predicted after calibration", "data": [r["predicted_after_s"] for r in runs]},
            ]}


def _jobs_context(fleet: Fleet) -> dict[str, Any]:
    """The files (without their text or parsed rows) with their import jobs, and the latest fit jobs."""
    uploads = list(fleet.calibration_uploads.defer(*CalibrationUpload.HEAVY_FIELDS).order_by("-created_at", "-id")[:100])
    jobs = jobs_by_id([u.job_id for u in uploads if u.job_id])
    rows = [{"upload": u, "job": jobs.get(u.job_id or 0)} for u in uploads]
    fits = fleet_jobs(fleet=fleet, kind=JobKind.CALIBRATION_FIT, limit=5)
    active = any(u.status == CalibrationUpload.Status.PENDING for u in uploads) or any(
        f.status in ACTIVE_STATUSES for f in fits)
    return {"rows": rows, "uploads": uploads, "fits": fits, "jobs_active": active,
            "ready": sum(1 for u in uploads if u.status == CalibrationUpload.Status.READY)}


def _upload(request: HttpRequest, fleet: Fleet) -> None:
    """One or several files (``file``, repeated) and/or a manifest: each file its own import job (issue #24)."""
    scenario = None
    if request.POST.get("scenario", "").strip():  # hostile JSON refused as the API does (#23)
        try:
            scenario = loads_json(request.POST["scenario"])
        except JSONTextError as exc:
            raise ValidationError({"scenario": [f"the scenario {exc}"]}) from None
    files = request.FILES.getlist("file")
    if not files:
        raise ValidationError({"file": ["choose one or more files"]})
    manifest_file = request.FILES.get("manifest")
    manifest = services.read_upload(manifest_file) if manifest_file is not None else None
    batch = calibration_batch_plan(  # kind "": every file's kind from the manifest
        files=read_batch_files(files), manifest=manifest, kind=request.POST.get("kind", ""), scenario=scenario,
        collective=request.POST.get("collective") or None)
    if len(batch) == 1 and manifest is None and request.POST.get("label"):
        batch[0].label = request.POST["label"][:120]
    stored, _ = calibration_batch_submit(fleet=fleet, user=request.user, batch=batch, manifest=manifest)
    if len(stored) == 1:
        upload, job = stored[0]
        messages.success(request, f"“{upload.label or upload.filename}” stored; importing it (job #{job.pk}).")
    else:
        jobs = ", ".join(f"#{job.pk}" for _, job in stored)
        messages.success(request, f"{len(stored)} files stored; importing each in its own job ({jobs}).")


@login_required
@require_http_methods(["GET", "POST"])
def fleet_calibration(request: HttpRequest, pk: int) -> HttpResponse:
    fleet = get_object_or_404(Fleet.objects.for_request(request).select_related("team"), pk=pk)
    can_plan = _can(request, fleet.team_id, Capability.PLAN)
    if _htmx(request) and request.GET.get("partial") == "jobs":
        # polled while a job runs; once none does, reload the page (a new profile, a file's summary)
        ctx = {"fleet": fleet, **_jobs_context(fleet)}
        if not ctx["jobs_active"]:
            response = HttpResponse(status=204)
            response["HX-Refresh"] = "true"
            return response
        return render(request, "portal/_calibration_jobs.html", ctx)
    errors: dict[str, Any] = {}
    if request.method == "POST":
        _require(request, fleet.team_id, Capability.PLAN)
        try:
            if request.POST.get("action") == "fit":
                job, _ = calibration_fit_submit(fleet=fleet, user=request.user, name=request.POST.get("name", ""),
                                                note=request.POST.get("note", ""))
                messages.success(request, f"Fit queued (job #{job.pk}); this page shows the new profile when it is done.")
            else:
                _upload(request, fleet)
            return HttpResponseRedirect(reverse("fleet-calibration", args=[fleet.pk]))
        except ValidationError as exc:
            errors = _error_dict(exc)
    profile = services.fleet_profile(fleet=fleet)
    doc = profile.profile if profile else {}
    charts = curve_charts(doc)
    steps = step_chart(doc)
    if steps:
        charts.append(steps)
    return render(request, "portal/fleet_calibration.html", {
        "fleet": fleet, "can_plan": can_plan, "errors": errors, "profile": profile, "doc": doc,
        "summary": profile.summary if profile else None,
        "versions": fleet.calibration_profiles.defer(*CalibrationProfile.HEAVY_FIELDS).order_by("-version")[:20],
        "charts": charts, "kinds": services.KINDS, "max_bytes": services.max_upload_bytes(),
        "max_batch_bytes": max_batch_bytes(), "max_batch_files": MAX_BATCH_FILES,
        **_jobs_context(fleet),
    }, status=400 if errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_calibration(request: HttpRequest, pk: int) -> HttpResponse:
    """Whether a scenario uses its fleet's calibration profile, or borrows another fleet's (issue #16)."""
    scenario = get_object_or_404(Scenario.objects.for_request(request).select_related("fleet", "team",
                                                                                       "calibration_fleet"), pk=pk)
    fleets = list(Fleet.objects.filter(team_id=scenario.team_id, calibration_profiles__isnull=False)
                  .distinct().order_by("name"))
    errors: dict[str, Any] = {}
    if request.method == "POST":
        _require(request, scenario.team_id, Capability.PLAN)
        borrow_id = request.POST.get("calibration_fleet", "")
        borrow = next((f for f in fleets if str(f.pk) == borrow_id), None)
        if borrow_id and borrow is None:
            errors = {"calibration_fleet": [f"fleet {borrow_id} has no calibration profile in this team"]}
        else:
            planning.scenario_update(scenario=scenario, user=request.user,
                                     use_calibration=request.POST.get("use_calibration") == "on",
                                     calibration_fleet=borrow)
            messages.success(request, "Calibration setting saved.")
            return HttpResponseRedirect(reverse("scenario-detail", args=[scenario.pk]))
    section = services.scenario_calibration(scenario=scenario)
    return render(request, "portal/scenario_calibration.html", {
        "scenario": scenario, "section": section, "fleets": fleets, "errors": errors,
        "can_plan": _can(request, scenario.team_id, Capability.PLAN),
    }, status=400 if errors else 200)
