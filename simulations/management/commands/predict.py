"""``manage.py predict FILE.json [--search] [--format json|table] [--top-k N]``: run the performance engine."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.catalog import CatalogError
from engine.performance.api import predict, search
from simulations.management.commands._documents import read_document
from simulations.services.advice import with_sizing_note


class Command(BaseCommand):
    help = "Predict step time, MFU, memory and time-to-train for a scenario JSON file (prints JSON)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="scenario document (JSON); '-' reads stdin")
        parser.add_argument("--search", action="store_true", help="also list the runner-up layouts")
        parser.add_argument("--format", choices=("json", "table"), default="json")
        parser.add_argument("--top-k", type=int, default=5, dest="top_k")

    def handle(self, *args: Any, **options: Any) -> None:
        doc = read_document(options["file"])
        if options["top_k"] < 0:
            raise CommandError("--top-k: must be >= 0")
        try:
            result = search(doc, top_k=options["top_k"]) if options["search"] else predict(doc)
        except (ValueError, CatalogError) as exc:  # ScenarioError / CatalogError name the field
            raise CommandError(str(exc).splitlines()[0]) from exc
        # the awkward-size note (GPU count and batch that factor badly, and the nearest sizes that factor well), as
        # the API and the portal add it to a run's result
        data = result.to_dict()
        engine_notes = len(data.get("notes") or [])
        data = with_sizing_note(kind="search" if options["search"] else "predict", document=doc, catalog=None,
                                result=data)
        if options["format"] == "json":
            self.stdout.write(json.dumps(data, indent=2, sort_keys=True))
        else:
            self.stdout.write(_table(data, added_notes=(data.get("notes") or [])[engine_notes:]))


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else ("-" if v is None else str(v))


def _table(d: dict[str, Any], added_notes: list[str] | None = None) -> str:
    """One row per figure, with its 80% interval (the model's error band for this regime) beside it; then the notes
    on a layout that does not fit and ``added_notes`` (the awkward-size note)."""
    keys = (
        "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
        "mfu", "hfu", "memory_gb_per_gpu", "fits", "time_to_train_days", "gpu_hours", "network_wait_fraction",
    )
    intervals = d.get("intervals") or {}
    rows = [(k, d[k], intervals.get(k)) for k in keys]
    rows += [(f"breakdown_s.{k}", v, None) for k, v in (d.get("breakdown_s") or {}).items()]
    rows += [(f"parallelism.{k}", v, None) for k, v in d["parallelism"].items()]
    if "candidates_evaluated" in d:
        rows += [("candidates_evaluated", d["candidates_evaluated"], None),
                 ("candidates_feasible", d["candidates_feasible"], None)]
    width = max(len(k) for k, _, _ in rows)
    out = []
    for k, v, band in rows:
        line = f"{k.ljust(width)}  {_fmt(v)}"
        if band:
            line += f"  (80%: {_fmt(band[0])} - {_fmt(band[1])})"
        out.append(line)
    if not d.get("fits", True):
        out += [f"note: {n}" for n in d.get("notes", []) if "fit" in n]
    out += [f"note: {n}" for n in added_notes or []]
    for i, alt in enumerate(d.get("alternatives", []), 1):
        p = alt["parallelism"]
        step = f"{alt['step_time_s']:.4g} s" if alt.get("step_time_s") is not None else "does not fit"
        out.append(
            f"alt {i}: tp{p['tp']} pp{p['pp']} dp{p['dp']} cp{p['cp']} ep{p['ep']} vpp{p['vpp']} mb{p['micro_batch']} "
            f"{p['recompute']} zero{p['zero']}: {step} - {alt['why_it_loses']}"
        )
    return "\n".join(out)
