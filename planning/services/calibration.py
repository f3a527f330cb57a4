"""Calibration of a fleet on the team's own measurements (issue #16).

Uploads (nccl-tests output, training step logs, GPU telemetry) are size-limited, decoded as UTF-8 text and
read by the engine's importers (``engine.calibration``: numbers through ``int``/``float`` only,
nothing executed or evaluated); a malformed file is refused with the importer's ``line N: reason`` under
``file``. A fit creates the fleet's next profile version (values, uncertainty, the data it came from),
change-logged. Scenarios on the fleet carry the current profile in their engine document (``calibration``)
unless they opt out (``use_calibration = False``); a scenario on hardware the team does not own may borrow
the profile of a similar fleet (``calibration_fleet``), which the results say.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction

from core.errors import ValidationError
from engine.calibration.fit import fit_profile
from engine.calibration.nccl import parse_nccl_tests
from engine.calibration.steplog import parse_step_log
from engine.calibration.telemetry import parse_gpu_telemetry
from engine.document.parse import parse_scenario
from engine.schema.calibration import Profile, finite_json
from planning import changelog
from planning.models import CalibrationProfile, CalibrationUpload, Fleet, ObjectChange, Scenario
from planning.services.catalogs import catalog_resolve
from planning.services.common import _err
from planning.services.documents import fleet_cluster

KINDS = ("nccl-tests", "step-log", "telemetry")
# A nccl-tests sweep is ~10 KB and a Megatron log at log-interval 1 ~300 B per step: 4 MiB holds > 10,000 steps.
DEFAULT_MAX_UPLOAD_BYTES = 4 * 1024 * 1024
MAX_FIT_UPLOADS = 60
MAX_UPLOADS_PER_FLEET = 500


def max_upload_bytes() -> int:
    return int(getattr(settings, "FP_CALIBRATION_MAX_UPLOAD_BYTES", DEFAULT_MAX_UPLOAD_BYTES))


def _text(content: bytes | str) -> str:
    raw = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    if len(raw) > max_upload_bytes():
        raise _err("file", f"{len(raw)} bytes exceeds the {max_upload_bytes()}-byte limit for calibration files")
    if not raw.strip():
        raise _err("file", "the file is empty")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _err("file", f"not UTF-8 text (byte {exc.start})") from None


def read_upload(file: Any) -> tuple[str, bytes]:
    """(name, bytes) of an uploaded file, reading at most the limit + 1 bytes."""
    name = str(getattr(file, "name", "") or "upload")[:200]
    data = file.read(max_upload_bytes() + 1)
    if isinstance(data, str):
        data = data.encode("utf-8")
    return name, data


def run_document(*, fleet: Fleet, document: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario document of a measured run on ``fleet``: the user's model / training / parallelism, and
    the fleet's cluster with the run's own GPU count (``cluster`` entries the user gave win)."""
    if not isinstance(document, Mapping):
        raise _err("scenario", "must be a scenario document (model, training, parallelism[, cluster])")
    version, values = catalog_resolve(catalog=None)
    del version
    cluster = {**fleet_cluster(fleet=fleet, catalog=values), **dict(document.get("cluster") or {})}
    doc = {k: v for k, v in document.items() if k in ("model", "training", "parallelism", "name")}
    doc["cluster"] = cluster
    try:
        parse_scenario(doc, values)
    except ValueError as exc:
        field = getattr(exc, "field", "") or "detail"
        raise ValidationError({f"scenario.{field}": [str(getattr(exc, "message", exc))]}) from None
    return doc


def calibration_upload_create(
    *, fleet: Fleet, user: Any, kind: str, content: bytes | str, filename: str = "", label: str = "",
    scenario: Mapping[str, Any] | None = None, collective: str | None = None, warmup_steps: int | str = "auto",
    tokens_per_step: float | None = None, gpus: int | None = None,
) -> CalibrationUpload:
    """Store and parse one measurement file for ``fleet`` (400 naming the field on any problem)."""
    if kind not in KINDS:
        raise _err("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if fleet.calibration_uploads.count() >= MAX_UPLOADS_PER_FLEET:
        raise _err("file", f"fleet already has {MAX_UPLOADS_PER_FLEET} calibration files; delete old ones first")
    text = _text(content)
    doc: dict[str, Any] | None = None
    try:
        if kind == "nccl-tests":
            parsed = parse_nccl_tests(text, collective=collective or None)
        elif kind == "telemetry":
            parsed = parse_gpu_telemetry(text)
        else:
            if scenario is None:
                raise _err("scenario", "a step log needs the run's scenario document (workload and layout as it ran)")
            doc = run_document(fleet=fleet, document=scenario)
            if tokens_per_step is None:
                tokens_per_step = float(doc["training"].get("global_batch", 0)) * float(doc["model"].get("seq_len", 0))
            if gpus is None:
                gpus = int(doc["cluster"].get("gpus") or fleet.gpus)
            parsed = parse_step_log(text, warmup_steps=warmup_steps, tokens_per_step=tokens_per_step or None,
                                    gpus=gpus)
    except ValidationError:
        raise
    except ValueError as exc:
        msg = str(exc)
        field = "collective" if msg.startswith("collective") else "warmup_steps" if msg.startswith("warmup") else "file"
        raise _err(field, msg) from None
    raw = text.encode("utf-8")
    with transaction.atomic():
        upload = CalibrationUpload.objects.create(
            team=fleet.team, fleet=fleet, kind=kind, label=(label or filename)[:120], filename=filename[:200],
            size_bytes=len(raw), sha256=hashlib.sha256(raw).hexdigest(), content=text, parsed=finite_json(parsed),
            scenario=doc, created_by=user, updated_by=user,
        )
        changelog.record(obj=upload, object_type="calibration-upload", action=ObjectChange.Action.CREATE, user=user,
                         after={k: v for k, v in changelog.snapshot(upload).items() if k not in ("content", "parsed")})
    return upload


def calibration_upload_delete(*, upload: CalibrationUpload, user: Any) -> None:
    with transaction.atomic():
        changelog.record(obj=upload, object_type="calibration-upload", action=ObjectChange.Action.DELETE, user=user,
                         before={k: v for k, v in changelog.snapshot(upload).items() if k not in ("content", "parsed")})
        upload.delete()


def calibration_fit(*, fleet: Fleet, user: Any, uploads: list[CalibrationUpload] | None = None, name: str = "",
                    note: str = "") -> CalibrationProfile:
    """Fit the fleet's next profile version from ``uploads`` (default: all of the fleet's files)."""
    chosen = list(uploads) if uploads is not None else list(fleet.calibration_uploads.order_by("pk"))
    if not chosen:
        raise _err("uploads", "no calibration files: upload nccl-tests output and/or step logs first")
    if len(chosen) > MAX_FIT_UPLOADS:
        raise _err("uploads", f"at most {MAX_FIT_UPLOADS} files per fit, got {len(chosen)}")
    for u in chosen:
        if u.fleet_id != fleet.pk:
            raise _err("uploads", f"file {u.pk} belongs to another fleet")
    _, values = catalog_resolve(catalog=None)
    cluster = fleet_cluster(fleet=fleet, catalog=values)
    nccl = [{**u.parsed, "label": u.label or u.filename, "upload_id": u.pk} for u in chosen if u.kind == "nccl-tests"]
    runs = [{"id": u.label or u.filename or f"upload-{u.pk}", "scenario": u.scenario, "step_log": u.parsed}
            for u in chosen if u.kind == "step-log"]
    telemetry = [{"label": u.label or u.filename, **{k: v for k, v in u.parsed.items() if k != "per_gpu"}}
                 for u in chosen if u.kind == "telemetry"]
    if not nccl and not runs:
        raise _err("uploads", "nothing to fit: give nccl-tests output and/or step logs (telemetry alone is not fitted)")
    with transaction.atomic():
        locked = Fleet.objects.select_for_update().get(pk=fleet.pk)  # one version number per fit
        last = locked.calibration_profiles.order_by("-version").first()
        version = (last.version if last else 0) + 1
        try:
            prof = fit_profile(cluster, nccl, runs, name=name or f"{fleet.name} calibration", catalog=values)
        except ValueError as exc:
            raise _err("uploads", str(exc)) from None
        prof.version = version
        doc = finite_json(prof.to_dict())
        doc["sources"] = [{"upload_id": u.pk, "kind": u.kind, "filename": u.filename, "label": u.label,
                           "sha256": u.sha256, "size_bytes": u.size_bytes} for u in chosen]
        doc["telemetry"] = telemetry
        profile = CalibrationProfile.objects.create(
            team=fleet.team, fleet=fleet, version=version, name=prof.name[:120], note=note[:500], profile=doc,
            created_by=user, updated_by=user,
        )
        profile.uploads.set(chosen)
        changelog.record(obj=profile, object_type="calibration-profile", action=ObjectChange.Action.CREATE,
                         user=user, after={"fleet": fleet.pk, "version": version, "name": profile.name,
                                           "summary": profile_summary(profile=profile)})
    return profile


def fleet_profile(*, fleet: Fleet) -> CalibrationProfile | None:
    """The fleet's current profile (highest version)."""
    return fleet.calibration_profiles.order_by("-version").first()


def profile_summary(*, profile: CalibrationProfile) -> dict[str, Any]:
    """The fitted values with uncertainty, the residual and the per-run errors (no curves)."""
    p = profile.profile or {}
    return {
        "version": profile.version,
        "collectives": [{k: c.get(k) for k in ("collective", "scope", "eta", "eta_sigma", "alpha_us", "alpha_us_sigma",
                                              "latency_scale", "latency_scale_sigma", "rms_rel_error_before",
                                              "rms_rel_error") if k in c} for c in p.get("collectives", [])],
        "gemm": p.get("gemm", {}),
        "residual": p.get("residual"),
        "runs": [{k: r.get(k) for k in ("id", "measured_step_time_s", "predicted_before_s", "predicted_after_s",
                                        "error_before", "error_after")} for r in p.get("runs", [])],
    }


def scenario_calibration(*, scenario: Scenario) -> dict[str, Any] | None:
    """The compact profile a scenario's engine document carries (None: none, or the scenario opted out)."""
    if not getattr(scenario, "use_calibration", True):
        return None
    source = scenario.calibration_fleet or scenario.fleet
    if source is None:
        return None
    profile = fleet_profile(fleet=source)
    if profile is None:
        return None
    section = Profile.from_dict(profile.profile).compact()
    section["name"] = f"{profile.name} ({source.name})"
    if scenario.calibration_fleet_id is not None and scenario.calibration_fleet_id != scenario.fleet_id:
        section["borrow"] = True
    return section


def fleet_calibration_scenarios(*, fleet: Fleet) -> list[int]:
    """Ids of the watched scenarios whose results depend on ``fleet``'s profile."""
    qs = Scenario.objects.filter(watched=True, use_calibration=True, team_id=fleet.team_id)
    own = qs.filter(fleet=fleet, calibration_fleet__isnull=True)
    borrowed = qs.filter(calibration_fleet=fleet)
    return sorted({s.pk for s in own} | {s.pk for s in borrowed})
