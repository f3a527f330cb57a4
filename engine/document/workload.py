"""Validate a workload (the ``model``, ``training`` and ``parallelism`` sections) without a cluster.

Workloads are saved on their own and combined with a fleet or cluster later, so save-time validation cannot run
the whole scenario parser. This runs the parser's own section parsers (every number through the bounds table,
every key and enum checked) on exactly those sections, so ``{"model": {}}`` is refused naming ``model.layers``.
Cross-field rules that need a cluster (degrees dividing the GPU count) are checked when a scenario is saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.document.parse import parse_model, parse_parallelism, parse_training
from engine.document.ranges import find_ranges, likely_scenario
from engine.errors import ScenarioError


def validate_workload(model: Any, training: Any, parallelism: Any = "auto") -> None:
    """Raise :class:`ScenarioError` naming the field if the workload sections are invalid."""
    doc: dict[str, Any] = {"model": model, "training": training, "parallelism": parallelism}
    for key in ("model", "training"):
        if not isinstance(doc[key], Mapping):
            raise ScenarioError(key, f"must be an object, got {type(doc[key]).__name__}")
    ranges = find_ranges(doc)
    d = likely_scenario(doc, ranges) if ranges else doc
    parse_model(d["model"])
    parse_training(d["training"])
    parse_parallelism(d["parallelism"])
