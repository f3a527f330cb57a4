"""``manage.py tco FILE.json [--format json|table] [--monte-carlo N] [--sensitivity] [--seed S]``.

Prints fabric sizing, TCO, goodput and performance of a scenario (JSON by default). Bad input exits with a
one-line CommandError naming the field (``costs.prices.QM9700: must be >= 0, got -1``).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.cost.tco import tco
from simulations.management.commands._documents import read_document


class Command(BaseCommand):
    help = "Fabric sizing, TCO, goodput (+ optional Monte Carlo and sensitivity) for a scenario JSON file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="scenario document (JSON); '-' reads stdin")
        parser.add_argument("--format", choices=("json", "table"), default="json")
        parser.add_argument("--monte-carlo", type=int, default=0, dest="monte_carlo", metavar="N",
                            help="Monte Carlo samples over the {low, likely, high} ranges (0 = off)")
        parser.add_argument("--sensitivity", action="store_true", help="one-at-a-time tornado of $ per run")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args: Any, **options: Any) -> None:
        doc = read_document(options["file"])
        if options["monte_carlo"] < 0:
            raise CommandError("--monte-carlo: must be >= 0")
        try:
            result = tco(doc, monte_carlo=options["monte_carlo"], sensitivity=options["sensitivity"],
                         seed=options["seed"])
        except (ValueError, KeyError, TypeError) as exc:  # ScenarioError / CatalogError carry the field name
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if isinstance(exc, KeyError):
                message = f"{exc.args[0]}: is required"
            raise CommandError(message) from exc
        if options["format"] == "json":
            self.stdout.write(json.dumps(result, indent=2, sort_keys=True))
        else:
            self.stdout.write(table(result))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def table(d: dict[str, Any]) -> str:
    """A plain-text summary of a tco() result."""
    fab, t, g = d["fabric"], d["tco"], d["goodput"]
    rows: list[tuple[str, Any]] = [
        ("fabric.switch_model", fab["switch_model"]),
        ("fabric.topology", f"{fab['tiers']}-tier {fab['topology']} x{fab['planes']} plane(s)"),
        *((f"fabric.switches.{k}", v) for k, v in fab["switches"].items()),
        ("fabric.transceivers", sum(fab["transceivers"].values())),
        ("fabric.cables", sum(fab["cables"].values())),
        ("fabric.network_power_kw", fab["network_power_kw"]),
    ]
    for key in ("capex_usd", "capex_per_gpu_usd", "network_capex_usd", "network_share_of_capex", "annual_opex_usd",
                "annual_tco_usd", "network_share_of_tco", "usd_per_gpu_hour", "run_days", "run_cost_usd",
                "usd_per_million_tokens", "stranded_usd_per_year"):
        rows.append((f"tco.{key}", t[key]))
    for key in ("interruptions_per_day", "mean_time_to_interrupt_h", "checkpoint_interval_min",
                "effective_training_fraction"):
        rows.append((f"goodput.{key}", g[key]))
    rows.append(("performance.time_to_train_days", d["performance"]["time_to_train_days"]))
    mc = d.get("monte_carlo")
    if mc:
        for key in ("time_to_train_days", "annual_tco_usd", "run_cost_usd"):
            p = mc[key]
            rows.append((f"monte_carlo.{key}", f"p10 {_fmt(p['p10'])} / p50 {_fmt(p['p50'])} / p90 {_fmt(p['p90'])}"))
    # the model's error band beside each figure it covers (engine.performance.error_bands)
    bands = {f"tco.{k}": v for k, v in (d.get("intervals") or {}).items()}
    bands["performance.time_to_train_days"] = (d.get("intervals") or {}).get("time_to_train_days")
    width = max(len(k) for k, _ in rows)
    out = [f"{k.ljust(width)}  {_fmt(v)}" + (f"  (80%: {_fmt(bands[k][0])} - {_fmt(bands[k][1])})" if bands.get(k) else "")
           for k, v in rows]
    out.append("")
    out.append("line items (annualized USD by category):")
    for cat, value in t["annual_by_category_usd"].items():
        if value:
            out.append(f"  {cat.ljust(12)} {_fmt(value)}")
    for row in d.get("sensitivity", []):
        out.append(f"  sens {row['input']}: {_fmt(row['low_value'])}..{_fmt(row['high_value'])} -> "
                   f"swing {_fmt(row['swing_usd'])} USD per run")
    return "\n".join(out)
