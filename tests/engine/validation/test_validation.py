"""Accuracy against published runs: MAPE <= 10%, no row worse than 20% (same constants for every row)."""

from __future__ import annotations

import json

import pytest

from engine.validation.evaluate import evaluate_sets
from engine.validation.report import render_markdown
from engine.validation.rows import summary, validation_rows
from engine.validation.runs import DEFAULT_RUNS, load_runs
from tests.paths import ROOT


@pytest.fixture(scope="module")
def rows():
    return validation_rows()


def test_runs_file_is_the_in_repo_copy_with_sources() -> None:
    assert DEFAULT_RUNS == ROOT / "engine" / "validation" / "data" / "published_runs.json"
    runs = load_runs()
    assert len(runs) >= 13
    assert all(r["source"] for r in runs)


def test_mape_and_worst_row(rows) -> None:
    s = summary(rows)
    report = "\n".join(f"{r.run_id}: {r.metric} measured {r.measured} predicted {r.predicted:.4g} "
                       f"({r.error * 100:+.1f}%)" for r in rows)
    assert s["mape"] <= 0.10, report
    assert s["worst"] <= 0.20, report


def test_every_metric_compared_like_with_like(rows) -> None:
    runs = {r["id"]: r for r in load_runs()}
    for row in rows:
        assert row.metric in runs[row.run_id]["measured"]
        assert row.predicted > 0


def test_auto_rows_use_search(rows) -> None:
    by_id = {r.run_id: r for r in rows}
    nemo = by_id["nemo-24.12-fp8-llama3-70b-64"]
    assert nemo.parallelism["recompute"] in ("none", "selective", "full")
    mega = by_id["megatron-sc21-table1-1008B"]
    assert mega.parallelism["recompute"] == "full" and mega.parallelism["vpp"] >= 1


def test_a_wrong_model_would_fail(rows) -> None:
    """The check is not vacuous: doubling every prediction breaks the bound."""
    runs = json.loads(DEFAULT_RUNS.read_text())["runs"]
    assert len(runs) == len(rows)
    doubled = [abs(r.predicted * 2 - r.measured) / r.measured for r in rows]
    assert sum(doubled) / len(doubled) > 0.10


def test_report_renders() -> None:
    md = render_markdown(evaluate_sets())
    assert "MAPE" in md and "| megatron-sc21-table1-1.7B |" in md
