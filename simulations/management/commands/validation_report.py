"""``manage.py validation_report``: regenerate docs/validation.md, engine/performance/data/error_bands.json, the
accuracy summary the portal and the API show (engine/validation/data/accuracy_summary.json) and (when matplotlib is
installed) docs/img/validation_scaling.png from engine/validation/data/."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from engine.validation.bands import ERROR_BANDS, error_bands_document, write_error_bands
from engine.validation.evaluate import evaluate_sets
from engine.validation.plots import write_scaling_plot
from engine.validation.report import REPO_ROOT, render_markdown
from engine.validation.rows import summary
from engine.validation.summary import SUMMARY_PATH, write_summary


class Command(BaseCommand):
    help = ("Predict every published run; write docs/validation.md (in-sample and leave-one-source-out), the "
            "error-band table the performance engine reads, the accuracy summary and the scaling plot.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", default=str(REPO_ROOT / "docs" / "validation.md"))
        parser.add_argument("--bands", default=str(ERROR_BANDS), help="where the error-band table is written")
        parser.add_argument("--plot", default=str(REPO_ROOT / "docs" / "img" / "validation_scaling.png"))
        parser.add_argument("--summary", default=str(SUMMARY_PATH), help="where the accuracy summary is written")

    def handle(self, *args: Any, **options: Any) -> None:
        ev = evaluate_sets(progress=lambda runs: tqdm(runs, desc="predicting published runs", unit="run",
                                                      file=sys.stderr, disable=None))
        plot = write_scaling_plot(ev.series, options["plot"])
        out = Path(options["output"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_markdown(ev, plot=plot), encoding="utf-8")
        doc = error_bands_document(ev.table, ev.sources(), date.today().isoformat())
        written = write_error_bands(doc, options["bands"])
        write_summary(ev, Path(options["summary"]))
        s = summary([r for st in ev.sets for r in st.rows])
        self.stdout.write(
            f"wrote {out}: {int(s['rows'])} rows, MAPE {s['mape'] * 100:.1f}%, worst row {s['worst'] * 100:.1f}%, "
            f"80% band coverage (LOSO) {ev.coverage() * 100:.0f}%; {options['bands']} "
            f"{'written' if written else 'unchanged'}; summary {options['summary']}; "
            f"plot {plot if plot else 'skipped (no matplotlib)'}")
