"""Seed the periodic tasks (django-celery-beat) idempotently: re-running changes nothing.

The reaper runs every ``FP_REAPER_EVERY_S`` seconds (15; an interval schedule: crontab cannot go below a minute):
with the 30 s run lease, a dead worker's run is re-claimed within lease + one period (issue #23). The
re-evaluation of watched scenarios runs hourly (crontab).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

REAPER = "fp: reap stuck runs"
# name, task, crontab (minute, hour), queue, expires_s
CRONTABS = (
    ("fp: re-evaluate watched scenarios", "simulations.reevaluate_watched", ("7", "*"), "default", 3000),
)


def reaper_every_s() -> int:
    return int(getattr(settings, "FP_REAPER_EVERY_S", 15))


class Command(BaseCommand):
    help = "Create or update the Fabric Planner beat schedules (reaper every FP_REAPER_EVERY_S, re-evaluation hourly)."

    def handle(self, *args: Any, **options: Any) -> None:
        every = reaper_every_s()
        interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=IntervalSchedule.SECONDS)
        # A reaper message older than its period is dropped (the next one is on its way): no pile-up on a busy queue.
        self._save(REAPER, "simulations.reap_stuck_runs", {"interval": interval, "crontab": None}, "default",
                   max(every - 1, 1), f"every {every} s")
        for name, task, (minute, hour), queue, expires in CRONTABS:
            crontab, _ = CrontabSchedule.objects.get_or_create(
                minute=minute, hour=hour, day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
            )
            self._save(name, task, {"crontab": crontab, "interval": None}, queue, expires, f"{minute} {hour} * * *")

    def _save(self, name: str, task: str, schedule: dict[str, Any], queue: str, expires: int, when: str) -> None:
        _, created = PeriodicTask.objects.update_or_create(
            name=name,
            defaults={"task": task, **schedule, "queue": queue, "expire_seconds": expires, "enabled": True,
                      "args": json.dumps([]), "kwargs": json.dumps({})},
        )
        self.stdout.write(f"{'created' if created else 'up to date'}: {name} ({task}, {when})")
