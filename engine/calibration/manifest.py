"""A calibration manifest: one fleet, its nccl-tests files and its runs' step logs, read from disk.

Shape (``examples/calibration/manifest.json``, ``tests/data/calibration/manifest.json``)::

    {"fleet": {<scenario cluster section>},
     "nccl": [{"file": "ar_16r.txt", "collective": "all_reduce"?, "ranks": 16?, "nodes": 2?}],
     "runs": [{"id": "run-1", "file": "megatron.log", "scenario": {<scenario document>},
               "parse": {"fmt"?, "warmup_steps"?, "tokens_per_step"?, "gpus"?}}]}

File names are relative to the manifest's folder and may not leave it. Used by ``manage.py calibrate``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.calibration.fit import fit_profile
from engine.calibration.nccl import parse_nccl_tests
from engine.calibration.steplog import parse_step_log
from engine.catalog import CatalogItems
from engine.schema.calibration import Profile

MAX_FILE_BYTES = 16 * 1024 * 1024
PARSE_KEYS = ("fmt", "warmup_steps", "tokens_per_step", "gpus")


def _read(base: Path, name: Any, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.file: a file name is required")
    path = (base / name).resolve()
    if base.resolve() not in path.parents:
        raise ValueError(f"{where}.file: {name!r} is outside the manifest's folder")
    if not path.is_file():
        raise ValueError(f"{where}.file: {name!r} not found")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{where}.file: {name!r} is larger than {MAX_FILE_BYTES} bytes")
    return path.read_text(encoding="utf-8")


def load_manifest(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(fleet, parsed nccl-tests files, runs with parsed step logs); errors name the entry and the line."""
    p = Path(path)
    doc = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("fleet"), dict):
        raise ValueError("fleet: the manifest needs a fleet (a scenario cluster section)")
    base = p.parent
    nccl = []
    for i, e in enumerate(doc.get("nccl") or []):
        where = f"nccl[{i}]"
        try:
            d = parse_nccl_tests(_read(base, e.get("file"), where), collective=e.get("collective"))
        except ValueError as exc:
            raise ValueError(f"{where} ({e.get('file')}): {exc}") from None
        for key in ("ranks", "nodes"):
            if e.get(key) is not None:
                d[key] = int(e[key])
        d["label"] = e.get("label") or e["file"]
        nccl.append(d)
    runs = []
    for i, r in enumerate(doc.get("runs") or []):
        where = f"runs[{i}]"
        opts = {k: v for k, v in (r.get("parse") or {}).items() if k in PARSE_KEYS}
        try:
            log = parse_step_log(_read(base, r.get("file"), where), **opts)
        except ValueError as exc:
            raise ValueError(f"{where} ({r.get('file')}): {exc}") from None
        runs.append({"id": r.get("id") or r["file"], "scenario": r.get("scenario"), "step_log": log})
    return doc["fleet"], nccl, runs


def fit_manifest(path: str | Path, *, name: str = "", catalog: CatalogItems | None = None) -> Profile:
    fleet, nccl, runs = load_manifest(path)
    return fit_profile(fleet, nccl, runs, name=name or Path(path).parent.name, catalog=catalog)
