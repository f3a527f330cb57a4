"""Several calibration files, or a manifest, in one request (issue #24): each file its own import job.

:func:`calibration_batch_plan` pairs the uploaded files with what the request says of them — the manifest's entry
(``simulations.services.calibration_manifest``: kind, the run's scenario and settings, the collective) or, for a file
the manifest does not name (or when there is none), the request's own ``kind`` / ``scenario`` / settings — and runs
the cheap checks on every file before anything is written: count and size per file and in total, not empty, UTF-8
and no NUL (naming the line), a kind. :func:`calibration_batch_submit` then stores every file and queues one
``cal-import`` job per file (``simulations.services.calibration``) in **one transaction**, after the team's
admission (its share of the workers, counted for every job): a file refused at any point — its scenario document
included — refuses the whole request with a 400 naming it (``files[1]`` and its name, or the manifest entry), and
nothing is stored or queued. What only the importer can see (a malformed row: ``line N: reason``) is said by that
file's job, as for a single upload; the other files are not affected.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from core.errors import Conflict, ValidationError
from core.text import JSONTextError, loads_json
from planning.models import CalibrationUpload, Fleet
from planning.services import calibration as planning_calibration
from simulations.models import JobKind, SimulationRun
from simulations.services.calibration import _job, _replay, check_idempotency_key
from simulations.services.calibration_manifest import MAX_ENTRIES, ManifestEntry, read_manifest
from simulations.services.runs import admit

MAX_BATCH_FILES = MAX_ENTRIES  # one fit's worth (planning.services.calibration.MAX_FIT_UPLOADS)
DEFAULT_MAX_BATCH_BYTES = 16 * 1024 * 1024  # four files at the per-file limit


def max_batch_bytes() -> int:
    """The bytes of one request's files together (``FP_CALIBRATION_MAX_BATCH_BYTES``)."""
    return int(getattr(settings, "FP_CALIBRATION_MAX_BATCH_BYTES", DEFAULT_MAX_BATCH_BYTES))


@dataclass
class BatchFile:
    """One uploaded file and how to import it; ``where`` names it in errors (``files[2]``), ``entry`` the manifest
    entry or request field its settings came from."""

    index: int
    name: str
    raw: bytes
    kind: str = ""
    entry: str = "kind"
    label: str = ""
    scenario: Mapping[str, Any] | None = None
    scenario_where: str = "scenario"
    collective: str | None = None
    warmup_steps: int | str = "auto"
    tokens_per_step: float | None = None
    gpus: int | None = None
    options: dict[str, int] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"files[{self.index}]"


def _bad(where: str, message: str) -> ValidationError:
    return ValidationError({where: [message]})


def read_batch_files(files: list[Any]) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of each uploaded file, reading at most the per-file limit + 1 bytes of each and stopping
    as soon as the count or the total is past its limit (400 naming ``files``)."""
    if len(files) > MAX_BATCH_FILES:
        raise _bad("files", f"at most {MAX_BATCH_FILES} files per request, got {len(files)}")
    out: list[tuple[str, bytes]] = []
    total, limit = 0, max_batch_bytes()
    for file in files:
        name, raw = planning_calibration.read_upload(file)
        total += len(raw)
        if total > limit:
            raise _bad("files", f"more than {limit:,} bytes in all: the limit of one request's files")
        out.append((name, raw))
    return out


def _check_text(f: BatchFile) -> None:
    """The cheap checks of one file's bytes (400 under ``files[i]`` with its name and, where there is one, line)."""
    limit = planning_calibration.max_upload_bytes()
    if len(f.raw) > limit:
        raise _bad(f.where, f"{f.name!r}: {len(f.raw):,} bytes exceeds the {limit:,}-byte limit for calibration files")
    if not f.raw.strip():
        raise _bad(f.where, f"{f.name!r}: the file is empty")
    try:
        text = f.raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = f.raw[:exc.start].count(b"\n") + 1
        raise _bad(f.where, f"{f.name!r}: line {line}: not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        line = text[:text.index("\x00")].count("\n") + 1
        raise _bad(f.where, f"{f.name!r}: line {line}: NUL character (\\u0000) not allowed")


def _apply(f: BatchFile, entry: ManifestEntry) -> None:
    f.kind, f.entry, f.label = entry.kind, entry.where, entry.label
    f.scenario, f.scenario_where = entry.scenario, f"{entry.where}.scenario"
    f.collective, f.warmup_steps, f.tokens_per_step, f.gpus = (entry.collective, entry.warmup_steps,
                                                                entry.tokens_per_step, entry.gpus)
    f.options = dict(entry.options)


def _match(files: list[BatchFile], entries: list[ManifestEntry]) -> set[int]:
    """Give each manifest entry its uploaded file (by name; a path in the manifest matches its last part)."""
    by_name: dict[str, list[BatchFile]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    taken: dict[int, str] = {}
    for entry in entries:
        found = by_name.get(entry.file) or by_name.get(entry.basename) or []
        if not found:
            raise _bad(f"{entry.where}.file", f"{entry.file!r} is not among the uploaded files "
                                              f"({', '.join(repr(n) for n in by_name) or 'none'})")
        if len(found) > 1:
            raise _bad(found[1].where, f"{found[1].name!r}: two uploaded files have this name; the manifest cannot "
                                       "tell them apart")
        f = found[0]
        if f.index in taken:
            raise _bad(f"{entry.where}.file", f"{entry.file!r} is already named by {taken[f.index]}")
        taken[f.index] = entry.where
        _apply(f, entry)
    return set(taken)


def calibration_batch_plan(
    *, files: list[tuple[str, bytes]], manifest: tuple[str, bytes] | None = None, kind: str = "",
    scenario: Mapping[str, Any] | str | None = None, collective: str | None = None, warmup_steps: int | str = "auto",
    tokens_per_step: float | None = None, gpus: int | None = None,
) -> list[BatchFile]:
    """Every uploaded file with its kind and settings, checked (no write); a 400 names the first bad file or entry.
    ``scenario`` (for step logs the manifest does not name) may be JSON text."""
    if isinstance(scenario, str):
        try:
            scenario = loads_json(scenario)
        except JSONTextError as exc:
            raise _bad("scenario", f"the scenario {exc}") from None
        if not isinstance(scenario, dict):
            raise _bad("scenario", "must be a scenario document (a JSON object)")
    if not files:
        raise _bad("files", "give one or more files (repeat the files field)")
    if len(files) > MAX_BATCH_FILES:
        raise _bad("files", f"at most {MAX_BATCH_FILES} files per request, got {len(files)}")
    batch = [BatchFile(index=i, name=name or f"file {i + 1}", raw=raw) for i, (name, raw) in enumerate(files)]
    total, limit = sum(len(f.raw) for f in batch), max_batch_bytes()
    if total > limit:
        raise _bad("files", f"{total:,} bytes in all exceeds the {limit:,}-byte limit of one request's files")
    for f in batch:
        _check_text(f)
    named = _match(batch, read_manifest(name=manifest[0], raw=manifest[1])) if manifest is not None else set()
    kinds = planning_calibration.KINDS
    for f in batch:
        if f.index in named:
            continue
        if not kind:
            why = "is not named by the manifest; give" if manifest is not None else "give"
            raise _bad(f.where, f"{f.name!r} {why} its kind (the kind field: {', '.join(kinds)}) or a manifest")
        f.kind, f.scenario, f.collective = kind, scenario, collective
        f.warmup_steps, f.tokens_per_step, f.gpus = warmup_steps, tokens_per_step, gpus
    return batch


def _rekey(f: BatchFile, exc: ValidationError) -> ValidationError:
    """A store's error (``file``, ``scenario.model.layers``, ``kind`` ...) named for this file of the request."""
    out: dict[str, list[str]] = {}
    for name, messages in exc.as_dict().items():
        if name == "file":
            key = f.where
        elif name == "scenario" or name.startswith("scenario."):
            key = f.scenario_where + name[len("scenario"):]
        elif name == "detail":
            key = f.where
        else:
            key = f"{f.entry}.{name}" if f.entry.startswith("manifest") else name
        out.setdefault(key, []).extend(f"{f.name!r}: {m}" for m in messages)
    return ValidationError(out)


def _request(fleet: Fleet, batch: list[BatchFile], manifest: tuple[str, bytes] | None) -> dict[str, Any]:
    return {"fleet": fleet.pk, "batch": [{"filename": f.name, "kind": f.kind, "label": f.label,
                                          "sha256": hashlib.sha256(f.raw).hexdigest()} for f in batch],
            "manifest": hashlib.sha256(manifest[1]).hexdigest() if manifest is not None else None}


def _replayed(*, fleet: Fleet, key: str | None, request: dict[str, Any],
              count: int) -> list[tuple[CalibrationUpload, SimulationRun]] | None:
    if key is None:
        return None
    runs = [_replay(team_id=fleet.team_id, kind=JobKind.CALIBRATION_IMPORT, key=f"{key}#{i}", request=request)
            for i in range(count)]
    if all(r is None for r in runs):
        return None
    if any(r is None for r in runs):
        raise Conflict({"Idempotency-Key": ["the request with this key was not stored whole; use a new key"]})
    ids = [int((r.params or {}).get("upload") or 0) for r in runs if r is not None]
    uploads = {u.pk: u for u in CalibrationUpload.objects.defer(*CalibrationUpload.HEAVY_FIELDS).filter(pk__in=ids)}
    if len(uploads) != len(ids):
        raise Conflict({"Idempotency-Key": ["a file this key uploaded was deleted; use a new key"]})
    return [(uploads[i], r) for i, r in zip(ids, runs, strict=True) if r is not None]


def _store(*, fleet: Fleet, user: Any, batch: list[BatchFile], request: dict[str, Any],
           key: str | None) -> list[tuple[CalibrationUpload, SimulationRun]]:
    out: list[tuple[CalibrationUpload, SimulationRun]] = []
    with transaction.atomic():
        admit(team_id=fleet.team_id, runs=len(batch))  # the team's share of the workers, for every job
        held = fleet.calibration_uploads.count()
        if held + len(batch) > planning_calibration.MAX_UPLOADS_PER_FLEET:
            raise _bad("files", f"the fleet holds {held} calibration files; {len(batch)} more would pass its limit "
                                f"of {planning_calibration.MAX_UPLOADS_PER_FLEET}: delete old ones first")
        for f in batch:
            try:
                upload = planning_calibration.calibration_upload_store(
                    fleet=fleet, user=user, kind=f.kind, content=f.raw, filename=f.name, label=f.label,
                    scenario=f.scenario, collective=f.collective, warmup_steps=f.warmup_steps,
                    tokens_per_step=f.tokens_per_step, gpus=f.gpus)
            except ValidationError as exc:
                raise _rekey(f, exc) from None
            fields = ["job_id"]
            if f.options:
                upload.options = {**(upload.options or {}), **f.options}
                fields.append("options")
            run = _job(fleet=fleet, user=user, kind=JobKind.CALIBRATION_IMPORT, request=request,
                       key=f"{key}#{f.index}" if key else None, params={"upload": upload.pk, "fleet": fleet.pk},
                       label=f"Import {upload.label or upload.filename or upload.kind} ({fleet.name})")
            upload.job_id = run.pk
            upload.save(update_fields=fields)
            out.append((upload, run))
    return out


def calibration_batch_submit(*, fleet: Fleet, user: Any, batch: list[BatchFile],
                             manifest: tuple[str, bytes] | None = None,
                             idempotency_key: str | None = None) -> tuple[list[tuple[CalibrationUpload, SimulationRun]],
                                                                          bool]:
    """Store every file of a planned batch and queue its import job, all or nothing: ``([(file, job)], replayed)``.
    With an ``Idempotency-Key``, a repeated request answers the first one's files and jobs (409: another request)."""
    key = check_idempotency_key(idempotency_key)
    request = _request(fleet, batch, manifest)
    for _ in range(2):
        earlier = _replayed(fleet=fleet, key=key, request=request, count=len(batch))
        if earlier is not None:
            return earlier, True
        try:
            return _store(fleet=fleet, user=user, batch=batch, request=request, key=key), False
        except IntegrityError:
            if key is None:
                raise
            continue  # the same key, at the same moment: the other request's jobs answer
    raise ValidationError({"Idempotency-Key": ["requests with this key kept colliding; try again"]})
