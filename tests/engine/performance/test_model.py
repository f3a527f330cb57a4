"""The orchestration (model.py): evaluate is the step terms reduced, per layout, in any chunking."""

from __future__ import annotations

import dataclasses

import numpy as np

from engine.document.parse import parse_scenario
from engine.performance.api import candidate_layouts
from engine.performance.context import make_context
from engine.performance.hardware import gpu_spec
from engine.performance.model import BREAKDOWN_KEYS, concat_evaluations, evaluate, step_terms
from engine.performance.terms.step import Breakdown
from tests.engine._scenarios import scenario


def test_evaluate_is_per_layout_whatever_the_chunking() -> None:
    s = parse_scenario(scenario(training={"zero": "auto", "recompute": "auto"}))
    lay = candidate_layouts(s)
    ctx = make_context(s, gpu_spec(s.cluster.gpu))
    whole = evaluate(ctx, lay)
    parts = [evaluate(ctx, lay.take(np.arange(0, 5))), evaluate(ctx, lay.take(np.arange(5, len(lay))))]
    halves = concat_evaluations(parts)
    for f in dataclasses.fields(whole):
        if f.name != "breakdown_s":
            assert np.array_equal(getattr(whole, f.name), getattr(halves, f.name)), f.name
    assert whole.fits.dtype == np.bool_
    terms = step_terms(ctx, lay)
    assert np.array_equal(whole.step_time_s, terms.step.step_s)
    assert np.array_equal(whole.memory_bytes, terms.memory.total_bytes)


def test_breakdown_keys_are_the_breakdown_record() -> None:
    assert tuple(f.name for f in dataclasses.fields(Breakdown)) == BREAKDOWN_KEYS
