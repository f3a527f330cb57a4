"""Calibration jobs (issues #16, #23): importing a measurement file and fitting a fleet's profile run on a worker.

Both are runs of the run machinery (claim, lease and heartbeat, reaper, progress, cancel; ``JobKind``):

* **import** (``cal-import``): the upload request stores the file's text as it came (:func:`calibration_import_submit`,
  a few cheap checks: kind, size, UTF-8, the step log's scenario) and answers 202 with the job; the job reads the
  file with the engine's importer and stores what it read (``parsed``, ``summary``, ``status = ready``) in the
  same transaction as its own end — or refuses it naming the line (``status = failed``, ``error``).
* **fit** (``cal-fit``): :func:`calibration_fit_submit` checks the files and answers 202 with the job; the job fits
  the engine's equations to them and writes the fleet's next profile version, its files and its change-log entry
  in the same transaction as its own end (the job's result names the version): all of it or nothing. The
  fleet's watched scenarios are re-evaluated after that commit.

Both accept a client's ``Idempotency-Key``: a request repeated with the key answers the job of the first one (and
so the same file, the same profile version), never a second; the same key with another request is a 409.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, ValidationError
from planning.models import CalibrationUpload, Fleet
from planning.services import calibration as planning_calibration
from simulations.models import JobKind, RunStatus, RunTrigger, SimulationRun
from simulations.services import dispatch
from simulations.services.hashing import engine_version
from simulations.services.reevaluation import reevaluate_watched

MAX_IDEMPOTENCY_KEY = 200


def calibration_fit_and_reevaluate(*, fleet: Fleet, user: Any, uploads: list[Any] | None = None, name: str = "",
                                   note: str = "") -> Any:
    """Fit the fleet's next profile version in this process; after the commit, re-evaluate the watched scenarios
    it moves (scripts and tests; the API and the portal submit a fit job)."""
    profile = planning_calibration.calibration_fit(fleet=fleet, user=user, uploads=uploads, name=name, note=note)
    _reevaluate_after_commit(fleet)
    return profile


def _reevaluate_after_commit(fleet: Fleet) -> None:
    ids = planning_calibration.fleet_calibration_scenarios(fleet=fleet)
    if ids:
        transaction.on_commit(lambda: reevaluate_watched(scenario_ids=ids))


# --- submitting -----------------------------------------------------------------------------------------------
def check_idempotency_key(key: str | None) -> str | None:
    """A client's Idempotency-Key header: printable, at most 200 characters (400 naming the header otherwise)."""
    if key is None or key == "":
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise ValidationError({"Idempotency-Key": [f"must be printable text of at most {MAX_IDEMPOTENCY_KEY} characters"]})
    return key


def _stored_key(team_id: int, kind: str, key: str) -> str:
    return f"{team_id}:{kind}:key:{hashlib.sha256(key.encode('utf-8')).hexdigest()[:40]}"


def _replay(*, team_id: int, kind: str, key: str | None, request: Mapping[str, Any]) -> SimulationRun | None:
    """The job an earlier request with this Idempotency-Key created (409 when that request was another one)."""
    if key is None:
        return None
    run = (SimulationRun.objects.filter(team_id=team_id, kind=kind, idempotency_key=_stored_key(team_id, kind, key))
           .order_by("pk").first())
    if run is not None and (run.input_snapshot or {}).get("request") != dict(request):
        raise Conflict({"Idempotency-Key": ["was used for a different request; use a new key for a new request"]})
    return run


def _job(*, fleet: Fleet, user: Any, kind: str, params: dict[str, Any], request: Mapping[str, Any], label: str,
         key: str | None) -> SimulationRun:
    """Insert a QUEUED job row (in the caller's transaction) and enqueue it once that commits."""
    snapshot = {"kind": kind, "params": params, "request": dict(request), "fleet": {"id": fleet.pk, "name": fleet.name}}
    digest = hashlib.sha256(json.dumps({**snapshot, "at": timezone.now().isoformat()}, sort_keys=True,
                                       default=str).encode()).hexdigest()
    actor = user if getattr(user, "pk", None) else None
    run = SimulationRun.objects.create(
        team=fleet.team, created_by=actor, updated_by=actor, kind=kind, trigger=RunTrigger.MANUAL, label=label[:200],
        input_snapshot=snapshot, input_hash=digest, engine_version=engine_version(), params=params, force=True,
        heartbeat_at=timezone.now(), idempotency_key=_stored_key(fleet.team_id, kind, key) if key else None,
    )
    dispatch.enqueue_runs([run.pk])
    return run


def calibration_import_submit(
    *, fleet: Fleet, user: Any, kind: str, content: bytes | str, filename: str = "", label: str = "",
    scenario: Mapping[str, Any] | None = None, collective: str | None = None, warmup_steps: int | str = "auto",
    tokens_per_step: float | None = None, gpus: int | None = None, idempotency_key: str | None = None,
) -> tuple[CalibrationUpload, SimulationRun, bool]:
    """Store a measurement file (status ``pending``) and queue its import job: ``(upload, job, replayed)``."""
    key = check_idempotency_key(idempotency_key)
    raw = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    request = {"fleet": fleet.pk, "kind": kind, "sha256": hashlib.sha256(raw).hexdigest(), "label": label,
               "filename": filename}
    for _ in range(2):
        earlier = _replay(team_id=fleet.team_id, kind=JobKind.CALIBRATION_IMPORT, key=key, request=request)
        if earlier is not None:
            upload = CalibrationUpload.objects.defer(*CalibrationUpload.HEAVY_FIELDS).filter(
                pk=int(earlier.params.get("upload") or 0)).first()
            if upload is None:
                raise Conflict({"Idempotency-Key": ["the file this key uploaded was deleted; use a new key"]})
            return upload, earlier, True
        try:
            with transaction.atomic():
                upload = planning_calibration.calibration_upload_store(
                    fleet=fleet, user=user, kind=kind, content=raw, filename=filename, label=label, scenario=scenario,
                    collective=collective, warmup_steps=warmup_steps, tokens_per_step=tokens_per_step, gpus=gpus)
                run = _job(fleet=fleet, user=user, kind=JobKind.CALIBRATION_IMPORT, request=request, key=key,
                           params={"upload": upload.pk, "fleet": fleet.pk},
                           label=f"Import {upload.label or upload.filename or upload.kind} ({fleet.name})")
                upload.job_id = run.pk
                upload.save(update_fields=["job_id"])
        except IntegrityError:
            if key is None:
                raise
            continue  # the same key, at the same moment: the other request's job answers
        return upload, run, False
    raise ValidationError({"Idempotency-Key": ["requests with this key kept colliding; try again"]})


def calibration_fit_submit(*, fleet: Fleet, user: Any, uploads: list[CalibrationUpload] | None = None, name: str = "",
                           note: str = "", idempotency_key: str | None = None) -> tuple[SimulationRun, bool]:
    """Check the files and queue a fit job of the fleet's next profile version: ``(job, replayed)``."""
    key = check_idempotency_key(idempotency_key)
    request = {"fleet": fleet.pk, "uploads": sorted(u.pk for u in uploads) if uploads is not None else None,
               "name": name, "note": note}
    for _ in range(2):
        earlier = _replay(team_id=fleet.team_id, kind=JobKind.CALIBRATION_FIT, key=key, request=request)
        if earlier is not None:
            return earlier, True
        chosen = planning_calibration.calibration_fit_uploads(fleet=fleet, uploads=uploads)
        try:
            with transaction.atomic():
                run = _job(fleet=fleet, user=user, kind=JobKind.CALIBRATION_FIT, request=request, key=key,
                           params={"fleet": fleet.pk, "uploads": [u.pk for u in chosen], "name": name, "note": note},
                           label=f"Fit {name or fleet.name + ' calibration'}")
        except IntegrityError:
            if key is None:
                raise
            continue
        return run, False
    raise ValidationError({"Idempotency-Key": ["requests with this key kept colliding; try again"]})


# --- the jobs (called by the run protocol, simulations.services.execution) ------------------------------------------
def job_compute(*, run: SimulationRun, progress: Callable[[int, str], None]) -> dict[str, Any]:
    """The job's engine work (no write): the importer's reading of the file, or the fit's profile document.
    A refused input raises ``ValidationError`` naming the field (a malformed file: ``file``, ``line N: ...``)."""
    params = run.params or {}
    if run.kind == JobKind.CALIBRATION_IMPORT:
        upload = CalibrationUpload.objects.filter(pk=int(params.get("upload") or 0)).first()
        if upload is None:
            raise ValidationError({"file": ["the file was deleted before it was imported"]})
        progress(20, f"reading {upload.kind} ({upload.size_bytes:,} bytes)")
        parsed = planning_calibration.calibration_upload_parse(upload=upload)
        if upload.kind == "nccl-tests":  # a manifest's ranks / nodes win over the header, as in manage.py calibrate
            parsed.update({k: int(v) for k, v in (upload.options or {}).items() if k in ("ranks", "nodes")})
        return {"upload": upload.pk, "parsed": parsed}
    fleet = Fleet.objects.filter(pk=int(params.get("fleet") or 0)).select_related("team").first()
    if fleet is None:
        raise ValidationError({"fleet": ["the fleet was deleted before the fit ran"]})
    ids = [int(i) for i in params.get("uploads") or []]
    found = {u.pk: u for u in CalibrationUpload.objects.filter(pk__in=ids, fleet=fleet).defer("content")}
    missing = [i for i in ids if i not in found]
    if missing:
        raise ValidationError({"uploads": [f"file(s) {', '.join(map(str, missing))} were deleted before the fit ran"]})
    chosen = planning_calibration.calibration_fit_uploads(fleet=fleet, uploads=[found[i] for i in ids])
    progress(20, f"fitting {len(chosen)} file(s)")
    doc = planning_calibration.calibration_fit_compute(fleet=fleet, uploads=chosen, name=str(params.get("name") or ""))
    return {"fleet": fleet.pk, "uploads": ids, "doc": doc}


def job_commit(*, run: SimulationRun, computed: Mapping[str, Any]) -> dict[str, Any]:
    """The job's writes, inside the transaction that ends the run; returns the run's result."""
    if run.kind == JobKind.CALIBRATION_IMPORT:
        upload = (CalibrationUpload.objects.defer(*CalibrationUpload.HEAVY_FIELDS).select_for_update()
                  .filter(pk=computed["upload"]).first())
        if upload is None:
            return {"upload": computed["upload"], "status": "deleted"}
        planning_calibration.calibration_upload_ready(upload=upload, parsed=computed["parsed"])
        return {"upload": upload.pk, "fleet": upload.fleet_id, "status": upload.status, "summary": upload.summary}
    fleet = Fleet.objects.select_related("team").get(pk=computed["fleet"])
    profile = planning_calibration.calibration_fit_commit(
        fleet=fleet, user=run.created_by, upload_ids=list(computed["uploads"]), doc=computed["doc"],
        note=str((run.params or {}).get("note") or ""))
    _reevaluate_after_commit(fleet)
    return {"profile": profile.pk, "version": profile.version, "fleet": fleet.pk, "name": profile.name}


def job_failed(*, run: SimulationRun, error: str) -> None:
    """The job refused its input (inside the transaction that fails the run): an import marks its file refused."""
    if run.kind == JobKind.CALIBRATION_IMPORT:
        planning_calibration.calibration_upload_refused(upload_id=int((run.params or {}).get("upload") or 0),
                                                        error=error)


def job_ended(*, run: SimulationRun) -> None:
    """After a job ended any way (cancelled, given up, an internal error): a file still pending is refused with why."""
    if run.kind != JobKind.CALIBRATION_IMPORT or run.status == RunStatus.SUCCEEDED or not run.is_terminal:
        return
    why = run.error or (run.progress_message if run.status == RunStatus.CANCELLED else f"import {run.status}")
    planning_calibration.calibration_upload_refused(upload_id=int((run.params or {}).get("upload") or 0),
                                                    error=why or f"import {run.status}")


def job_error(exc: ValidationError) -> tuple[str, str]:
    """(field, message) of a refused input, for the run's ``error_field`` / ``error``."""
    errors = exc.as_dict()
    field = next(iter(errors), "detail")
    messages = errors.get(field) or [exc.message]
    return ("" if field == "detail" else field), "; ".join(str(m) for m in messages)


def fleet_jobs(*, fleet: Fleet, kind: str | None = None, limit: int = 10) -> list[SimulationRun]:
    """The fleet's latest calibration jobs (newest first), without their results' bulk."""
    qs = SimulationRun.objects.filter(team_id=fleet.team_id, params__fleet=fleet.pk)
    qs = qs.filter(kind=kind) if kind else qs.filter(kind__in=JobKind.values)
    return list(qs.only("id", "kind", "status", "progress", "progress_message", "error", "error_field", "params",
                        "result", "label", "queued_at", "started_at", "finished_at", "team_id")
                .order_by("-pk")[:limit])


def jobs_by_id(ids: list[int]) -> dict[int, SimulationRun]:
    """Jobs by id (one query), for lists of files that show their import's progress."""
    wanted = [i for i in ids if i]
    if not wanted:
        return {}
    return {r.pk: r for r in SimulationRun.objects.filter(pk__in=wanted).only(
        "id", "kind", "status", "progress", "progress_message", "error", "team_id")}
