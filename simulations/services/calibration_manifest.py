"""Reading an uploaded calibration manifest (issue #24): which uploaded file is what, and how it was measured.

The manifest is the engine's (``engine/calibration/manifest.py``, what ``manage.py calibrate`` reads), as JSON or
YAML, or one row per file as CSV:

* JSON / YAML: ``{"nccl": [{"file", "collective"?, "ranks"?, "nodes"?, "label"?}],
  "runs": [{"id"?, "file", "scenario", "parse"?: {"fmt"?, "warmup_steps"?, "tokens_per_step"?, "gpus"?},
  "format"?, "label"?}], "telemetry"?: [{"file", "label"?}]}``. Other top-level keys (``fleet``, ``about``,
  ``truth``) are read by ``manage.py calibrate`` only: uploaded files belong to the fleet the request names. As in
  the engine's reader, other keys of an entry (a generator's true values, notes) are ignored.
* CSV: a header row, then one row per file: ``file,kind`` and any of ``label,collective,ranks,nodes,scenario``
  (the run's scenario document as JSON text), ``warmup_steps,tokens_per_step,gpus,format``.

Each entry becomes a :class:`ManifestEntry`; a bad manifest is refused (``ValidationError``) naming the entry
(``manifest.runs[1].file``) or, for CSV and for text that cannot be decoded at all, the line. Nothing is executed or
evaluated: JSON through :func:`core.text.loads_json`, YAML through PyYAML's safe loader with aliases refused (no
"billion laughs") and the decoded document passed through the same size, depth and text checks as JSON.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from core.errors import ValidationError
from core.text import MAX_JSON_DEPTH, JSONTextError, loads_json
from engine.calibration.steplog import FORMATS

MAX_MANIFEST_BYTES = 1024 * 1024  # 60 run scenarios are ~100 KB of JSON
MAX_ENTRIES = 60  # one fit's worth of files (planning.services.calibration.MAX_FIT_UPLOADS)
KIND_OF_SECTION = {"nccl": "nccl-tests", "runs": "step-log", "telemetry": "telemetry"}
PARSE_KEYS = {"fmt", "warmup_steps", "tokens_per_step", "gpus"}
CSV_COLUMNS = ("file", "kind", "label", "collective", "ranks", "nodes", "scenario", "warmup_steps",
               "tokens_per_step", "gpus", "format")


@dataclass
class ManifestEntry:
    """One file the manifest names, with the settings it was measured with (``where``: the entry's path)."""

    where: str
    file: str
    kind: str
    label: str = ""
    scenario: Mapping[str, Any] | None = None
    collective: str | None = None
    warmup_steps: int | str = "auto"
    tokens_per_step: float | None = None
    gpus: int | None = None
    options: dict[str, int] = field(default_factory=dict)  # nccl-tests: ranks / nodes the header lacks

    @property
    def basename(self) -> str:
        return PurePosixPath(self.file.replace("\\", "/")).name


def _bad(where: str, message: str) -> ValidationError:
    return ValidationError({where: [message]})


def _decode(raw: bytes) -> str:
    if len(raw) > MAX_MANIFEST_BYTES:
        raise _bad("manifest", f"{len(raw):,} bytes exceeds the {MAX_MANIFEST_BYTES:,}-byte limit for a manifest")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise _bad("manifest", f"line {line}: not UTF-8 text (byte {exc.start})") from None


def _format(name: str, text: str) -> str:
    suffix = PurePosixPath(name.lower()).suffix
    if suffix in (".json", ".yaml", ".yml", ".csv"):
        return {".yml": "yaml"}.get(suffix, suffix[1:])
    head = text.lstrip()
    if head.startswith(("{", "[")):
        return "json"
    first = head.split("\n", 1)[0]
    return "csv" if "," in first and first.split(",")[0].strip().lower() == "file" else "yaml"


def _load_yaml(text: str) -> Any:
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1 if event.start_mark else 0
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise _bad("manifest", f"line {line}: YAML anchors and aliases are not allowed in a manifest")
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                if depth > MAX_JSON_DEPTH:
                    raise _bad("manifest", f"line {line}: nested more than {MAX_JSON_DEPTH} levels deep")
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
        value = yaml.safe_load(text)
    except ValueError as exc:  # a number Python will not convert (an integer of 5,000 digits)
        raise _bad("manifest", f"not valid YAML: {exc}"[:300]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        reason = getattr(exc, "problem", None) or "not valid YAML"
        raise _bad("manifest", f"{where}not valid YAML: {reason}") from None
    try:  # the same size, item and text checks as a JSON manifest (dates and the like become text)
        return loads_json(json.dumps(value, default=str), max_bytes=4 * MAX_MANIFEST_BYTES)
    except (JSONTextError, ValueError) as exc:
        raise _bad("manifest", f"the YAML document {exc}") from None


def _int(where: str, value: Any, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _bad(where, f"must be an integer from {low:,} to {high:,}")
    try:
        n = int(value) if not isinstance(value, float) or value.is_integer() else None
    except ValueError:
        n = None
    if n is None or not low <= n <= high:
        raise _bad(where, f"must be an integer from {low:,} to {high:,}, got {value!r}")
    return n


def _number(where: str, value: Any, *, low: float, high: float) -> float:
    try:
        x = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        x = float("nan")
    if not low <= x <= high:  # NaN fails too
        raise _bad(where, f"must be a number from {low:g} to {high:g}, got {value!r}")
    return x


def _text(where: str, value: Any, *, limit: int, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            raise _bad(where, "is required")
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise _bad(where, f"must be text of at most {limit} characters")
    return value


def _settings(entry: ManifestEntry, where: str, values: Mapping[str, Any]) -> None:
    """Step-log settings (``warmup_steps``, ``tokens_per_step``, ``gpus``, ``fmt``/``format``) onto ``entry``."""
    if values.get("warmup_steps") not in (None, "", "auto"):
        entry.warmup_steps = _int(f"{where}.warmup_steps", values["warmup_steps"], low=0, high=10_000_000)
    if values.get("tokens_per_step") not in (None, ""):
        entry.tokens_per_step = _number(f"{where}.tokens_per_step", values["tokens_per_step"], low=1.0, high=1e12)
    if values.get("gpus") not in (None, ""):
        entry.gpus = _int(f"{where}.gpus", values["gpus"], low=1, high=10_000_000)
    for key in ("fmt", "format"):  # checked; the importer reads the format from the text itself
        if values.get(key) not in (None, "") and values[key] not in FORMATS:
            raise _bad(f"{where}.{key}", f"must be one of {', '.join(FORMATS)}, got {values[key]!r}")


def _nccl_options(entry: ManifestEntry, where: str, values: Mapping[str, Any]) -> None:
    entry.collective = _text(f"{where}.collective", values.get("collective"), limit=40) or None
    for key in ("ranks", "nodes"):
        if values.get(key) not in (None, ""):
            entry.options[key] = _int(f"{where}.{key}", values[key], low=1, high=10_000_000)


def _from_document(doc: Any) -> list[ManifestEntry]:
    if not isinstance(doc, dict):
        raise _bad("manifest", "must be an object with nccl, runs and/or telemetry lists (the engine's manifest)")
    entries: list[ManifestEntry] = []
    for section, kind in KIND_OF_SECTION.items():
        items = doc.get(section)
        if items is None:
            continue
        if not isinstance(items, list):
            raise _bad(f"manifest.{section}", "must be a list of entries")
        for i, item in enumerate(items):
            where = f"manifest.{section}[{i}]"
            if not isinstance(item, dict):
                raise _bad(where, "must be an object naming a file")
            name = _text(f"{where}.file", item.get("file"), limit=200, required=True)
            label = _text(f"{where}.id", item.get("id"), limit=120) or _text(f"{where}.label", item.get("label"),
                                                                              limit=120)
            entry = ManifestEntry(where=where, file=name, kind=kind, label=label)
            if section == "nccl":
                _nccl_options(entry, where, item)
            elif section == "runs":
                if not isinstance(item.get("scenario"), dict):
                    raise _bad(f"{where}.scenario", "a run needs its scenario document (model, training, "
                                                    "parallelism as it ran)")
                entry.scenario = item["scenario"]
                parse = item.get("parse") or {}
                if not isinstance(parse, dict):
                    raise _bad(f"{where}.parse", f"must be an object of {', '.join(sorted(PARSE_KEYS))}")
                _settings(entry, f"{where}.parse", {k: v for k, v in parse.items() if k in PARSE_KEYS})
                _settings(entry, where, {"format": item.get("format")})
            entries.append(entry)
    return entries


def _from_csv(text: str) -> list[ManifestEntry]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if "file" not in header or "kind" not in header or unknown:
        why = f"unknown column {unknown[0]!r}" if unknown else "the header needs the columns file and kind"
        raise _bad("manifest", f"line 1: {why} (columns: {', '.join(CSV_COLUMNS)})")
    reader.fieldnames = header
    entries: list[ManifestEntry] = []
    try:
        for row in reader:
            where = f"manifest[line {reader.line_num}]"
            if None in row:
                raise _bad("manifest", f"line {reader.line_num}: more cells than the header has columns")
            values = {k: (v or "").strip() for k, v in row.items()}
            if not any(values.values()):
                continue
            kind = values["kind"]
            if kind not in KIND_OF_SECTION.values():
                raise _bad(f"{where}.kind", f"must be one of {', '.join(KIND_OF_SECTION.values())}, got {kind!r}")
            entry = ManifestEntry(where=where, file=_text(f"{where}.file", values["file"], limit=200, required=True),
                                  kind=kind, label=_text(f"{where}.label", values.get("label"), limit=120))
            if kind == "nccl-tests":
                _nccl_options(entry, where, values)
            elif kind == "step-log":
                if not values.get("scenario"):
                    raise _bad(f"{where}.scenario", "a step log needs its run's scenario document (JSON text)")
                try:
                    entry.scenario = loads_json(values["scenario"])
                except JSONTextError as exc:
                    raise _bad(f"{where}.scenario", f"the scenario {exc}") from None
                if not isinstance(entry.scenario, dict):
                    raise _bad(f"{where}.scenario", "must be a scenario document (a JSON object)")
                _settings(entry, where, values)
            entries.append(entry)
            if len(entries) > MAX_ENTRIES:
                break
    except csv.Error as exc:
        raise _bad("manifest", f"line {reader.line_num}: not valid CSV ({exc})") from None
    return entries


def read_manifest(*, name: str, raw: bytes) -> list[ManifestEntry]:
    """The entries of an uploaded manifest (JSON, YAML or CSV: by its name's extension, else by its text)."""
    text = _decode(raw)
    if not text.strip():
        raise _bad("manifest", "the manifest is empty")
    kind = _format(name, text)
    if kind == "csv":
        entries = _from_csv(text)
    elif kind == "json":
        try:
            doc = loads_json(text, max_bytes=MAX_MANIFEST_BYTES)
        except JSONTextError as exc:
            raise _bad("manifest", f"the manifest {exc}") from None
        entries = _from_document(doc)
    else:
        entries = _from_document(_load_yaml(text))
    if not entries:
        raise _bad("manifest", "names no files (give nccl, runs and/or telemetry entries)")
    if len(entries) > MAX_ENTRIES:
        raise _bad("manifest", f"names more than {MAX_ENTRIES} files (one fit's worth)")
    return entries
