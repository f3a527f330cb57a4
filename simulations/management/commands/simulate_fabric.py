"""``manage.py simulate_fabric FILE.json``: a fabric study with the flow-level simulator (issue #13).

Examples::

    manage.py simulate_fabric scenario.json                       # single-QP ECMP vs 8 QPs vs adaptive
    manage.py simulate_fabric scenario.json --routing ecmp --qps 4 --placement fragmented --format json
    manage.py simulate_fabric scenario.json --traffic all-to-all:ep --seeds 10

Bad input exits non-zero with one line naming the option or scenario field.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.catalog import CatalogError
from engine.flowsim.placement import JOB_PLACEMENTS
from engine.flowsim.simulate import simulate
from engine.flowsim.study import study
from engine.schema.types import ROUTINGS
from simulations.management.commands._documents import read_document


class Command(BaseCommand):
    help = "Simulate a collective phase on the scenario's fabric (flow level) and print efficiency per routing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="scenario document (JSON); '-' reads stdin")
        parser.add_argument("--traffic", default="ring-allreduce",
                            help="ring-allreduce, all-to-all, permutation, ... (optionally kind:group)")
        parser.add_argument("--ranks", type=int, default=None, help="job size in GPUs (default: all)")
        parser.add_argument("--routing", choices=ROUTINGS, default=None,
                            help="one routing mode (default: compare single-QP ECMP, 8 QPs, adaptive)")
        parser.add_argument("--qps", type=int, default=None)
        parser.add_argument("--placement", choices=JOB_PLACEMENTS, default="packed")
        parser.add_argument("--fragmentation", type=float, default=0.5)
        parser.add_argument("--background", type=float, default=0.0)
        parser.add_argument("--seeds", type=int, default=20)
        parser.add_argument("--format", choices=("json", "table"), default="table")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        doc = read_document(options["file"])
        show = not options["no_progress"] and sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if show:
                bar = "#" * (30 * done // total)
                sys.stderr.write(f"\r[{bar:<30}] seeds {done}/{total}")
                sys.stderr.flush()

        common = {"ranks": options["ranks"], "placement": options["placement"], "seeds": options["seeds"],
                  "fragmentation": options["fragmentation"], "background": options["background"],
                  "progress": progress}
        try:
            if options["routing"] is None:
                out = study(doc, options["traffic"], **common)
            else:
                out = simulate(doc, options["traffic"], routing=options["routing"], qps=options["qps"], **common)
        except (ValueError, CatalogError) as exc:  # ScenarioError / CatalogError name the field
            raise CommandError(str(exc).splitlines()[0]) from exc
        finally:
            if show:
                sys.stderr.write("\n")
        if options["format"] == "json":
            self.stdout.write(json.dumps(out, indent=2, sort_keys=True))
        else:
            self.stdout.write(_table(out))


def _table(out: dict[str, Any]) -> str:
    if "table" in out:
        lines = [f"{'variant':<18} {'p10':>6} {'p50':>6} {'p90':>6} {'mean flow':>9}  bottleneck"]
        lines += [f"{r['label']:<18} {r['p10']:>6.3f} {r['p50']:>6.3f} {r['p90']:>6.3f} {r['flow_mean']:>9.3f}  "
                  f"{r['bottleneck_tier']}" for r in out["table"]]
        lines.append(out["quote"])
        return "\n".join(lines)
    e = out["efficiency"]
    util = ", ".join(f"{k} {v:.2f}" for k, v in out["tier_utilization"].items())
    return "\n".join([
        f"efficiency p10/p50/p90: {e['p10']:.3f} / {e['p50']:.3f} / {e['p90']:.3f}",
        f"bottleneck tier: {out['bottleneck_tier']}",
        f"tier utilization: {util}",
        f"mean flow rate / ideal: {out['flow_throughput']['mean']:.3f}",
        f"flows {out['flows']:,}, links {out['links']:,}, {out['elapsed_s']:.2f} s",
    ])
