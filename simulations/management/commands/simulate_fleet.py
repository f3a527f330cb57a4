"""``manage.py simulate_fleet PLAN.json [--replications N] [--format json|table] [--seed S] [--search]``.

Simulates a capacity plan (docs/fleet-model.md) N times with seeds S, S+1, ...: P10/P50/P90 of utilization,
queue waits, deadlines and the first shortfall day, and the quarterly table. With ``--search`` (a separate
step: it simulates every purchase option N times, options x N replications, so it takes (options + 1) times
as long), the purchase search when the plan lists ``candidates``: the cheapest option meeting the deadlines at
the plan's confidence, and why the others lose. Runs the engine in this process: no database, no worker. Bad input exits non-zero with one
line naming the field (``clusters[1].gpus: must be an integer ...``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from engine.fleet.core import simulate_replications
from engine.fleet.plan import MAX_REPLICATIONS, parse_plan
from engine.fleet.search import search_purchases
from simulations.management.commands._documents import read_document


class Command(BaseCommand):
    help = "Simulate a fleet capacity plan (JSON) over its horizon; P10/P50/P90 and the purchase recommendation."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="plan document (JSON); '-' reads stdin")
        parser.add_argument("--replications", type=int, default=None, metavar="N",
                            help="seeds to simulate (default: the plan's replications, else 10)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--format", choices=("json", "table"), default="json")
        parser.add_argument("--search", action="store_true", dest="search",
                            help="also run the purchase search over the plan's candidates (each option simulated "
                                 "with the same N seeds; takes options + 1 times as long)")
        parser.add_argument("--no-search", action="store_true", dest="no_search",
                            help="the default (kept for older scripts): no purchase search")

    def handle(self, *args: Any, **options: Any) -> None:
        n = options["replications"]
        if n is not None and not 1 <= n <= MAX_REPLICATIONS:
            raise CommandError(f"--replications: must be between 1 and {MAX_REPLICATIONS}, got {n}")
        if not 0 <= options["seed"] < 2**31:
            raise CommandError("--seed: must be between 0 and 2147483647")
        doc = read_document(options["file"])
        try:
            plan = parse_plan(doc)
            reps = n if n is not None else plan.replications
            with tqdm(total=reps, desc="replications", unit="run", file=sys.stderr, disable=None) as bar:
                out = simulate_replications(plan, reps, options["seed"], progress=lambda i, _t: bar.update(1))
            if plan.candidates and not options["search"]:
                out["purchase_options"] = len(plan.candidates) + 1  # not searched: say how many there are
            if options["search"] and not options["no_search"]:
                total = reps * (len(plan.candidates) + 1)
                with tqdm(total=total, desc="purchase options", unit="run", file=sys.stderr, disable=None) as bar:
                    out["purchase"] = search_purchases(plan, reps, options["seed"],
                                                       progress=lambda i, _t: bar.update(1))
        except (ValueError, KeyError, TypeError) as exc:  # ScenarioError carries the field path
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CommandError(message) from exc
        if options["format"] == "json":
            self.stdout.write(json.dumps(out, indent=2, sort_keys=True, default=float))
        else:
            self.stdout.write(table(out))


def _n(replications: int) -> str:
    return f"{replications} replication{'' if replications == 1 else 's'}"


def _b(band: dict[str, Any], fmt: str = "{:.3g}") -> str:
    vals = [band.get(k) for k in ("p10", "p50", "p90")]
    if all(v is None for v in vals):
        return "none"
    return " / ".join("-" if v is None else fmt.format(v) for v in vals)


def table(out: dict[str, Any]) -> str:
    """Plain-text report: headline bands, per-cluster utilization, quarters, recommendation."""
    s = out["summary"]
    first = out["first"]
    lines = [f"replications: {s['replications']} (P10 / P50 / P90)"]
    rows = [
        ("utilization (allocated / available)", _b(s["utilization"], "{:.1%}")),
        ("productive utilization", _b(s["productive_utilization"], "{:.1%}")),
        ("lost to failures and repair", _b(s["lost_to_failures_fraction"], "{:.1%}")),
        ("fragmented (idle while jobs wait)", _b(s["fragmented_fraction"], "{:.1%}")),
        ("mean queue wait, days", _b(s["wait_days_mean"], "{:.2f}")),
        ("P90 queue wait, days", _b(s["wait_days_p90"], "{:.2f}")),
        ("jobs completed", _b(s["jobs_completed"], "{:,.0f}")),
        ("deadlines missed", _b(s["deadlines_missed"], "{:.0f}")),
        ("first shortfall day", _b(s["first_shortfall_day"], "{:.0f}")),
        ("interruptions", _b(s["interruptions"], "{:,.0f}")),
    ]
    if "usd_per_delivered_gpu_hour" in s:
        rows.append(("USD per delivered GPU-hour", _b(s["usd_per_delivered_gpu_hour"], "{:.2f}")))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    lines.append(f"  replications with a shortfall: {s['replications_with_shortfall']} of {s['replications']}; "
                 f"meeting all deadlines: {s['replications_meeting_all_deadlines']}")
    lines.append("")
    seed = first["seed"]
    lines.append(f"per cluster (seed {seed}): mean GPUs allocated / productive / failed / idle of capacity")
    for name, tl in first["timeline"].items():
        days = max(len(tl["capacity"]), 1)
        mean = {k: sum(tl[k]) / days for k in ("allocated", "productive", "failed", "idle", "capacity")}
        lines.append(f"  {name}: {mean['allocated']:,.0f} / {mean['productive']:,.0f} / {mean['failed']:,.0f} / "
                     f"{mean['idle']:,.0f} of {mean['capacity']:,.0f}")
    lines.append("")
    lines.append(f"quarters (seed {seed}): GPU-hours demanded / delivered, capex, opex, USD per delivered GPU-hour")
    for q in first["quarters"]:
        cost = ""
        if "capex_usd" in q:
            per = q["usd_per_delivered_gpu_hour"]
            cost = (f", capex ${q['capex_usd'] / 1e6:,.1f}M, opex ${q['opex_usd'] / 1e6:,.1f}M"
                    f", {'-' if per is None else f'${per:.2f}'}")
        lines.append(f"  Q{q['quarter']} (days {q['start_day']}-{q['end_day']}): {q['gpu_hours_demanded'] / 1e6:,.2f}M"
                     f" / {q['gpu_hours_delivered'] / 1e6:,.2f}M{cost}")
    named = [j for j in first["jobs"] if j["deadline_day"] is not None]
    if named:
        lines.append("")
        lines.append(f"named jobs (seed {seed}):")
        for j in first["jobs"]:
            end = "not finished" if j["end_day"] is None else f"ends day {j['end_day']:.1f}"
            met = {True: "met", False: "MISSED", None: "-"}[j["deadline_met"]]
            lines.append(f"  {j['name']}: {j['gpus']} GPUs on {j['cluster']}, {end}, deadline "
                         f"{j['deadline_day']} {met}")
    purchase = out.get("purchase")
    if out.get("purchase_options") and not purchase:
        lines.append("")
        lines.append(f"purchase search: not run ({out['purchase_options']} options; add --search to simulate each "
                     f"of them {s['replications']} times)")
    if purchase:
        lines.append("")
        rec = purchase["recommendation"]
        q = round(purchase["confidence"] * 100)
        if rec is None:
            lines.append(f"purchase: {purchase['note']} (over {_n(purchase['replications'])})")
        else:
            lines.append(f"recommended purchase (meets every deadline at P{q} over {_n(purchase['replications'])}, "
                         f"the same seeds for every option): {rec['option']}, capex "
                         f"${rec['capex_usd'] / 1e6:,.1f}M, cash in horizon ${rec['cost_usd'] / 1e6:,.1f}M, "
                         f"first shortfall day {_b(rec['first_shortfall_day'], '{:.0f}')}")
        for alt in purchase["alternatives"][:8]:
            lines.append(f"  {alt['option']}: {alt['why_it_loses']}")
    return "\n".join(lines)
