"""Load engine/catalog/data/*.json as the global read-only default catalog (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from planning import services


class Command(BaseCommand):
    help = "Load the engine's default vendor catalog into the database; a new version only if the files changed."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--note", default="Loaded from engine/catalog/data")

    def handle(self, *args: Any, **options: Any) -> None:
        version = services.catalog_load_default(note=options["note"])
        self.stdout.write(self.style.SUCCESS(
            f"{version.catalog.name}: v{version.number} with {version.items.count()} items"
        ))
