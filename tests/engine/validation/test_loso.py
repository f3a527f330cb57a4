"""Leave-one-source-out (issue #22 item 1): the registry's refit hooks see every source but the predicted
row's; with no hook the LOSO rows are the in-sample rows; the registry names real sources."""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager

from engine.validation.loso import loso_rows
from engine.validation.registry import (
    ROW_DERIVED_CONSTANTS,
    RowDerivedConstant,
    grounded_sources,
    refit_hooks,
)
from engine.validation.rows import ValidationRow
from engine.validation.runs import RUN_SETS, load_runs, source_key


def _run(run_id: str, source: str) -> dict:
    return {"id": run_id, "source": source, "scenario": {}, "measured": {"mfu": 0.5}}


def _row(run_id: str, source: str, predicted: float = 0.5) -> ValidationRow:
    return ValidationRow(run_id, source, "mfu", 0.5, predicted, {}, True, predicted)


def test_refit_hooks_never_see_the_predicted_rows_source() -> None:
    runs = [_run("a1", "Paper A, arXiv 2101.00001"), _run("a2", "Paper A, arXiv 2101.00001, Table 2"),
            _run("b1", "Paper B, arXiv 2102.00002"), _run("c1", "Vendor C summary (page)")]
    state: dict[str, set[str]] = {}

    @contextmanager
    def refit(training):
        state["training"] = {source_key(r["source"]) for r in training}
        yield
        state.pop("training")

    def predict_rows(batch):
        out = []
        for r in batch:
            assert source_key(r["source"]) not in state["training"]  # its own source was left out
            out.append(_row(r["id"], r["source"], predicted=0.1 * len(state["training"])))
        return out

    constant = RowDerivedConstant("X", "nowhere", "1", "test rows", ("arXiv 2101.00001",), refit=refit)
    in_sample = [_row(r["id"], r["source"]) for r in runs]
    loso = loso_rows(runs, in_sample, [constant], predict_rows)
    assert [r.run_id for r in loso] == ["a1", "a2", "b1", "c1"]  # the order of the runs
    # the two arms of paper A are one source: each was predicted with the 2 other sources
    assert [r.predicted for r in loso] == [0.2, 0.2, 0.2, 0.2]
    assert loso != in_sample


def test_without_a_refit_hook_loso_is_the_in_sample_rows() -> None:
    runs = [_run("a1", "arXiv 2101.00001"), _run("b1", "arXiv 2102.00002")]
    in_sample = [_row("a1", "arXiv 2101.00001"), _row("b1", "arXiv 2102.00002")]

    def never(batch):
        raise AssertionError("nothing to refit: no prediction")

    unhooked = [dataclasses.replace(c, refit=None) for c in ROW_DERIVED_CONSTANTS]
    assert loso_rows(runs, in_sample, unhooked, never) == in_sample


def test_every_row_derived_constant_has_a_refit_hook() -> None:
    assert refit_hooks() == list(ROW_DERIVED_CONSTANTS)
    assert grounded_sources() == set()


def test_the_registry_names_sources_that_exist_in_the_sets() -> None:
    keys = {source_key(r["source"]) for s in RUN_SETS for r in load_runs(s.path)}
    for c in ROW_DERIVED_CONSTANTS:
        assert c.sources and set(c.sources) <= keys, c.name
        assert c.where.startswith("engine/performance/")
    assert grounded_sources() <= keys


def test_source_key_is_the_publication() -> None:
    assert source_key("Jiang et al., MegaScale (NSDI'24, arXiv 2402.15627), Sec. 6.1 Table 2 (Megatron-LM arm)") \
        == source_key("Jiang et al., MegaScale (NSDI'24, arXiv 2402.15627), Sec. 6.1 Table 2 (MegaScale arm)") \
        == "arXiv 2402.15627"
    assert source_key("NVIDIA NeMo Framework 25.02 performance summary (docs, System DGX-B200)") == \
        "NVIDIA NeMo Framework 25.02 performance summary"
    assert source_key("mosaicml/llm-foundry scripts/train/benchmarking/README.md, table 'H100 80GB BF16'") == \
        source_key("mosaicml/llm-foundry scripts/train/benchmarking/README.md")


def test_run_ids_are_unique_across_sets() -> None:
    ids = [r["id"] for s in RUN_SETS for r in load_runs(s.path)]
    assert len(ids) == len(set(ids))
