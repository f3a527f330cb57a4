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

import copy
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
MAX_WARMUP_LISTED = 1000  # warm-up steps named one by one in a stored step log (the count is kept beyond)


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


def _warmup(value: int | str) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _err("warmup_steps", 'must be "auto" or an integer >= 0')
    try:
        n = int(value)
    except ValueError:
        raise _err("warmup_steps", 'must be "auto" or an integer >= 0') from None
    if n < 0:
        raise _err("warmup_steps", 'must be "auto" or an integer >= 0')
    return n


def calibration_upload_store(
    *, fleet: Fleet, user: Any, kind: str, content: bytes | str, filename: str = "", label: str = "",
    scenario: Mapping[str, Any] | None = None, collective: str | None = None, warmup_steps: int | str = "auto",
    tokens_per_step: float | None = None, gpus: int | None = None,
) -> CalibrationUpload:
    """Store one measurement file of ``fleet`` as it came (status ``pending``): the cheap checks only — kind, size,
    UTF-8, not empty, the step log's scenario document (400 naming the field). The importer runs in the import job
    (:func:`calibration_upload_parse`), which names the line of a malformed file."""
    if kind not in KINDS:
        raise _err("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if fleet.calibration_uploads.count() >= MAX_UPLOADS_PER_FLEET:
        raise _err("file", f"fleet already has {MAX_UPLOADS_PER_FLEET} calibration files; delete old ones first")
    text = _text(content)
    options: dict[str, Any] = {}
    doc: dict[str, Any] | None = None
    if kind == "nccl-tests":
        if collective:
            options["collective"] = str(collective)[:40]
    elif kind == "step-log":
        if scenario is None:
            raise _err("scenario", "a step log needs the run's scenario document (workload and layout as it ran)")
        doc = run_document(fleet=fleet, document=scenario)
        if tokens_per_step is None:
            tokens_per_step = float(doc["training"].get("global_batch", 0)) * float(doc["model"].get("seq_len", 0))
        if gpus is None:
            gpus = int(doc["cluster"].get("gpus") or fleet.gpus)
        options.update(warmup_steps=_warmup(warmup_steps), tokens_per_step=tokens_per_step or None, gpus=gpus)
    raw = text.encode("utf-8")
    with transaction.atomic():
        upload = CalibrationUpload.objects.create(
            team=fleet.team, fleet=fleet, kind=kind, label=(label or filename)[:120], filename=filename[:200],
            size_bytes=len(raw), sha256=hashlib.sha256(raw).hexdigest(), content=text, parsed={}, scenario=doc,
            options=options, status=CalibrationUpload.Status.PENDING, created_by=user, updated_by=user,
        )
        changelog.record(obj=upload, object_type="calibration-upload", action=ObjectChange.Action.CREATE, user=user,
                         after=_loggable(upload))
    return upload


def _loggable(upload: CalibrationUpload) -> dict[str, Any]:
    """The change-log snapshot of a file without its text and parsed rows (never loaded for it either)."""
    light = copy.copy(upload)
    light.content, light.parsed = "", {}  # a deferred field assigned is not fetched
    return {k: v for k, v in changelog.snapshot(light).items() if k not in CalibrationUpload.HEAVY_FIELDS}


def calibration_upload_parse(*, upload: CalibrationUpload) -> dict[str, Any]:
    """Read a stored file with the engine's importer (pure: no write). A malformed file raises ``ValidationError``
    naming ``file`` (or ``collective`` / ``warmup_steps``) with the importer's ``line N: reason``."""
    text = upload.content
    opts = dict(upload.options or {})
    try:
        if upload.kind == "nccl-tests":
            parsed = parse_nccl_tests(text, collective=opts.get("collective") or None)
        elif upload.kind == "telemetry":
            parsed = parse_gpu_telemetry(text)
        else:
            parsed = parse_step_log(text, warmup_steps=opts.get("warmup_steps", "auto"),
                                    tokens_per_step=opts.get("tokens_per_step") or None, gpus=opts.get("gpus"))
    except ValueError as exc:
        msg = str(exc)
        field = "collective" if msg.startswith("collective") else "warmup_steps" if msg.startswith("warmup") else "file"
        raise _err(field, msg) from None
    return compact_parsed(upload.kind, finite_json(parsed))


def compact_parsed(kind: str, parsed: Mapping[str, Any]) -> dict[str, Any]:
    """What a fit needs of an importer's result: a step log's aggregates without its per-step rows (a 4 MiB log has
    ~200,000 of them; the fit reads the median, its error and the warm-up), everything of the others."""
    out = dict(parsed)
    if kind == "step-log":
        steps = out.pop("steps", None) or []
        out["steps_logged"] = len(steps)
        excluded = list(out.get("warmup_excluded") or [])
        if len(excluded) > MAX_WARMUP_LISTED:
            out["warmup_excluded"] = excluded[:MAX_WARMUP_LISTED]
            out["warmup_excluded_count"] = len(excluded)
    return out


def upload_summary(kind: str, parsed: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures a list shows of an imported file (stored beside it: lists never read ``parsed``)."""
    p = parsed or {}
    if kind == "nccl-tests":
        return {k: p.get(k) for k in ("collective", "collective_source", "ranks", "nodes", "nccl_version",
                                      "complete", "warnings", "avg_busbw_gbytes_s")} | {"rows": len(p.get("rows", []))}
    if kind == "step-log":
        return {k: p.get(k) for k in ("format", "step_time_s", "step_time_sem_rel", "steps_used",
                                      "warmup_excluded", "tflops_per_gpu", "notes")}
    return {k: v for k, v in p.items() if k != "per_gpu"}


def calibration_upload_ready(*, upload: CalibrationUpload, parsed: Mapping[str, Any]) -> CalibrationUpload:
    """Store what the importer read (the caller's transaction: the import job's end)."""
    upload.parsed = dict(parsed)
    upload.summary = finite_json(upload_summary(upload.kind, parsed))
    upload.status = CalibrationUpload.Status.READY
    upload.error = ""
    upload.save(update_fields=["parsed", "summary", "status", "error", "updated_at"])
    return upload


def calibration_upload_refused(*, upload_id: int, error: str) -> None:
    """Mark a file the import refused (or whose import ended without reading it)."""
    CalibrationUpload.objects.filter(pk=upload_id, status=CalibrationUpload.Status.PENDING).update(
        status=CalibrationUpload.Status.FAILED, error=error[:5000])


def calibration_upload_create(
    *, fleet: Fleet, user: Any, kind: str, content: bytes | str, filename: str = "", label: str = "",
    scenario: Mapping[str, Any] | None = None, collective: str | None = None, warmup_steps: int | str = "auto",
    tokens_per_step: float | None = None, gpus: int | None = None,
) -> CalibrationUpload:
    """Store, parse and summarise one file in the caller's process (seeds, scripts, tests): all or nothing. The
    API and the portal store the file and leave the parse to an import job instead."""
    with transaction.atomic():
        upload = calibration_upload_store(fleet=fleet, user=user, kind=kind, content=content, filename=filename,
                                          label=label, scenario=scenario, collective=collective,
                                          warmup_steps=warmup_steps, tokens_per_step=tokens_per_step, gpus=gpus)
        return calibration_upload_ready(upload=upload, parsed=calibration_upload_parse(upload=upload))


def calibration_upload_delete(*, upload: CalibrationUpload, user: Any) -> None:
    with transaction.atomic():
        changelog.record(obj=upload, object_type="calibration-upload", action=ObjectChange.Action.DELETE, user=user,
                         before=_loggable(upload))
        upload.delete()


def calibration_fit_uploads(*, fleet: Fleet, uploads: list[CalibrationUpload] | None = None) -> list[CalibrationUpload]:
    """The files a fit of ``fleet`` reads (default: all its imported files), checked (400 naming ``uploads``)."""
    if uploads is None:
        chosen = list(fleet.calibration_uploads.filter(status=CalibrationUpload.Status.READY)
                      .defer("content").order_by("pk"))
    else:
        chosen = list(uploads)
    if not chosen:
        raise _err("uploads", "no imported calibration files: upload nccl-tests output and/or step logs first")
    if len(chosen) > MAX_FIT_UPLOADS:
        raise _err("uploads", f"at most {MAX_FIT_UPLOADS} files per fit, got {len(chosen)}")
    for u in chosen:
        if u.fleet_id != fleet.pk:
            raise _err("uploads", f"file {u.pk} belongs to another fleet")
        if u.status != CalibrationUpload.Status.READY:
            state = "is still being imported" if u.status == CalibrationUpload.Status.PENDING else "was refused"
            raise _err("uploads", f"file {u.pk} {state}: fit imported files only")
    if not any(u.kind in ("nccl-tests", "step-log") for u in chosen):
        raise _err("uploads", "nothing to fit: give nccl-tests output and/or step logs (telemetry alone is not fitted)")
    return chosen


def calibration_fit_compute(*, fleet: Fleet, uploads: list[CalibrationUpload], name: str = "") -> dict[str, Any]:
    """The engine's fit over ``uploads`` (pure: no write): the profile document without its version."""
    _, values = catalog_resolve(catalog=None)
    cluster = fleet_cluster(fleet=fleet, catalog=values)
    nccl = [{**u.parsed, "label": u.label or u.filename, "upload_id": u.pk} for u in uploads if u.kind == "nccl-tests"]
    runs = [{"id": u.label or u.filename or f"upload-{u.pk}", "scenario": u.scenario, "step_log": u.parsed}
            for u in uploads if u.kind == "step-log"]
    telemetry = [{"label": u.label or u.filename, **{k: v for k, v in u.parsed.items() if k != "per_gpu"}}
                 for u in uploads if u.kind == "telemetry"]
    if not nccl and not runs:
        raise _err("uploads", "nothing to fit: give nccl-tests output and/or step logs (telemetry alone is not fitted)")
    try:
        prof = fit_profile(cluster, nccl, runs, name=name or f"{fleet.name} calibration", catalog=values)
    except ValueError as exc:
        raise _err("uploads", str(exc)) from None
    doc = finite_json(prof.to_dict())
    doc["sources"] = [{"upload_id": u.pk, "kind": u.kind, "filename": u.filename, "label": u.label,
                       "sha256": u.sha256, "size_bytes": u.size_bytes} for u in uploads]
    doc["telemetry"] = telemetry
    return doc


def calibration_fit_commit(*, fleet: Fleet, user: Any, upload_ids: list[int], doc: Mapping[str, Any],
                           note: str = "") -> CalibrationProfile:
    """Store a fit as the fleet's next profile version with its change-log entry, in one transaction (the caller's,
    when it has one: the fit job's end commits with it)."""
    with transaction.atomic():
        locked = Fleet.objects.select_for_update().get(pk=fleet.pk)  # one version number per fit
        last = locked.calibration_profiles.order_by("-version").only("version").first()
        version = (last.version if last else 0) + 1
        stored = dict(doc)
        stored["version"] = version
        profile = CalibrationProfile(team=fleet.team, fleet=fleet, version=version,
                                     name=str(stored.get("name") or "")[:120], note=note[:500], profile=stored,
                                     created_by=user, updated_by=user)
        profile.summary = profile_summary(profile=profile)
        profile.save()
        profile.uploads.set(upload_ids)
        changelog.record(obj=profile, object_type="calibration-profile", action=ObjectChange.Action.CREATE,
                         user=user, after={"fleet": fleet.pk, "version": version, "name": profile.name,
                                           "summary": profile.summary})
    return profile


def calibration_fit(*, fleet: Fleet, user: Any, uploads: list[CalibrationUpload] | None = None, name: str = "",
                    note: str = "") -> CalibrationProfile:
    """Fit the fleet's next profile version from ``uploads`` (default: all of the fleet's imported files) in the
    caller's process (seeds, scripts, tests; the API and the portal run a fit job instead)."""
    chosen = calibration_fit_uploads(fleet=fleet, uploads=uploads)
    doc = calibration_fit_compute(fleet=fleet, uploads=chosen, name=name)
    return calibration_fit_commit(fleet=fleet, user=user, upload_ids=[u.pk for u in chosen], doc=doc, note=note)


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
