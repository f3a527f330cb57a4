"""``manage.py reevaluate``: re-run watched scenarios whose catalog, fleet or engine changed — now.

The same service the hourly beat task calls (``reevaluate_watched``); useful right after a catalog price
import. ``--wait`` follows the queued runs with a progress bar until they finish.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from simulations import services
from simulations.models import ACTIVE_STATUSES, SimulationRun


class Command(BaseCommand):
    help = "Re-evaluate watched scenarios whose inputs changed (catalog version, fleet, engine)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--scenario", type=int, action="append", help="only these scenario ids")
        parser.add_argument("--wait", action="store_true", help="follow the runs until they finish")
        parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait with --wait")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["timeout"] <= 0:
            raise CommandError("--timeout: must be positive")
        created = services.reevaluate_watched(scenario_ids=options["scenario"])
        run_ids = [r.new_run_id for r in created if r.new_run_id]
        self.stdout.write(f"{len(created)} re-evaluation(s) queued")
        for r in created:
            self.stdout.write(f"  scenario {r.scenario_id}: {', '.join(r.reasons)} -> run {r.new_run_id}")
        if not options["wait"] or not run_ids:
            return
        deadline = time.monotonic() + options["timeout"]
        with tqdm(total=len(run_ids), desc="re-evaluations", unit="run", file=sys.stderr) as bar:
            done = 0
            while done < len(run_ids):
                if time.monotonic() > deadline:
                    raise CommandError(f"--timeout: {len(run_ids) - done} run(s) still active")
                now = SimulationRun.objects.filter(pk__in=run_ids).exclude(status__in=ACTIVE_STATUSES).count()
                bar.update(now - done)
                done = now
                time.sleep(0.5)
        for r in created:
            r.refresh_from_db()
            self.stdout.write(f"  scenario {r.scenario_id}: {r.summary or r.new_run.status if r.new_run else ''}")
