"""Leave-one-source-out predictions: every row predicted with each row-derived constant refit without the
rows of that row's source (registry.py).

For every source (runs.source_key) the registry's refit hooks are entered with the runs of all OTHER sources,
and the source's own rows are predicted inside them. With no hook (today) nothing is refit, and the LOSO rows
are the in-sample rows, unchanged: the report says so instead of hiding it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from engine.validation.registry import ROW_DERIVED_CONSTANTS, RowDerivedConstant, refit_hooks
from engine.validation.rows import ValidationRow, validation_rows
from engine.validation.runs import source_key

PredictRows = Callable[[list[dict[str, Any]]], list[ValidationRow]]


def loso_rows(runs: Sequence[dict[str, Any]], in_sample: Sequence[ValidationRow],
              constants: Sequence[RowDerivedConstant] = ROW_DERIVED_CONSTANTS,
              predict_rows: PredictRows = validation_rows,
              refits: dict[str, dict[str, float]] | None = None) -> list[ValidationRow]:
    """The rows of ``runs`` (every set together: a constant may use rows of any set) predicted leave-one-
    source-out, in the order of ``runs``; ``in_sample`` (same order) is returned as is when no constant has a
    refit hook. ``refits``, when given, receives each held-out source's refit values of the constants that can be
    read (``RowDerivedConstant.current``)."""
    hooks = refit_hooks(constants)
    if not hooks:
        return list(in_sample)
    by_id: dict[str, ValidationRow] = {}
    for held_out in sorted({source_key(r.get("source", "")) for r in runs}):
        training = [r for r in runs if source_key(r.get("source", "")) != held_out]
        predicted = [r for r in runs if source_key(r.get("source", "")) == held_out]
        with ExitStack() as stack:
            for c in hooks:
                assert c.refit is not None
                stack.enter_context(c.refit(training))
            if refits is not None:
                refits[held_out] = {c.name: c.current() for c in hooks if c.current is not None}
            for row in predict_rows(predicted):
                by_id[row.run_id] = row
    return [by_id[r["id"]] for r in runs]
