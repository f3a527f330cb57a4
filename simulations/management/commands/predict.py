"""``manage.py predict FILE.json [--search] [--format json|table] [--top-k N]``: run the performance engine."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.catalog import CatalogError
from engine.performance.api import predict, search
from simulations.management.commands._documents import read_document


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
        data = result.to_dict()
        if options["format"] == "json":
            self.stdout.write(json.dumps(data, indent=2, sort_keys=True))
        else:
            self.stdout.write(_table(data))


def _table(d: dict[str, Any]) -> str:
    keys = (
        "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
        "mfu", "hfu", "memory_gb_per_gpu", "fits", "time_to_train_days", "gpu_hours", "network_wait_fraction",
    )
    rows = [(k, d[k]) for k in keys]
    rows += [(f"breakdown_s.{k}", v) for k, v in d["breakdown_s"].items()]
    rows += [(f"parallelism.{k}", v) for k, v in d["parallelism"].items()]
    if "candidates_evaluated" in d:
        rows += [("candidates_evaluated", d["candidates_evaluated"]), ("candidates_feasible", d["candidates_feasible"])]
    width = max(len(k) for k, _ in rows)
    out = [f"{k.ljust(width)}  {v:.4g}" if isinstance(v, float) else f"{k.ljust(width)}  {v}" for k, v in rows]
    for i, alt in enumerate(d.get("alternatives", []), 1):
        p = alt["parallelism"]
        out.append(
            f"alt {i}: tp{p['tp']} pp{p['pp']} dp{p['dp']} cp{p['cp']} ep{p['ep']} vpp{p['vpp']} mb{p['micro_batch']} "
            f"{p['recompute']} zero{p['zero']}: {alt['step_time_s']:.4g} s - {alt['why_it_loses']}"
        )
    return "\n".join(out)
