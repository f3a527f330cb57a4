"""``manage.py validation_report``: regenerate docs/validation.md from engine/validation/data/."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from engine.validation import REPO_ROOT, load_runs, render_markdown, summary, validation_rows


class Command(BaseCommand):
    help = "Predict every published run and write the comparison table to docs/validation.md."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", default=str(REPO_ROOT / "docs" / "validation.md"))

    def handle(self, *args: Any, **options: Any) -> None:
        runs = load_runs()
        rows = []
        for run in tqdm(runs, desc="predicting published runs", unit="run", file=sys.stderr, disable=None):
            rows.extend(validation_rows([run]))
        out = Path(options["output"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_markdown(rows), encoding="utf-8")
        s = summary(rows)
        self.stdout.write(f"wrote {out}: MAPE {s['mape'] * 100:.1f}%, worst row {s['worst'] * 100:.1f}%")
