"""Seed the periodic tasks (django-celery-beat, crontab) idempotently: re-running changes nothing."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand
from django_celery_beat.models import CrontabSchedule, PeriodicTask

SCHEDULES = (
    # name, task, crontab (minute, hour), queue, expires_s
    ("fp: reap stuck runs", "simulations.reap_stuck_runs", ("*/2", "*"), "default", 110),
    ("fp: re-evaluate watched scenarios", "simulations.reevaluate_watched", ("7", "*"), "default", 3000),
)


class Command(BaseCommand):
    help = "Create or update the Fabric Planner beat schedules (reaper every 2 min, re-evaluation hourly)."

    def handle(self, *args: Any, **options: Any) -> None:
        for name, task, (minute, hour), queue, expires in SCHEDULES:
            crontab, _ = CrontabSchedule.objects.get_or_create(
                minute=minute, hour=hour, day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
            )
            _, created = PeriodicTask.objects.update_or_create(
                name=name,
                defaults={"task": task, "crontab": crontab, "interval": None, "queue": queue,
                          "expire_seconds": expires, "enabled": True, "args": json.dumps([]),
                          "kwargs": json.dumps({})},
            )
            self.stdout.write(f"{'created' if created else 'up to date'}: {name} ({task}, {minute} {hour} * * *)")
