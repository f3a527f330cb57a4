"""explain (explain.py): every term of predict's layout, JSON-able, each number with its unit, adding up to the
step time predict reports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.errors import ScenarioError
from engine.performance.api import predict
from engine.performance.explain import explain, unit_of
from tests.engine._scenarios import LLAMA_7B, scenario


def _doc(zero: int = 3) -> dict[str, Any]:
    return scenario(model=LLAMA_7B, training={"zero": zero, "global_batch": 128, "recompute": "selective"},
                    parallelism={"tp": 4, "pp": 2, "cp": 1, "ep": 1, "vpp": 2, "sequence_parallel": True},
                    cluster={"gpus": 64})


def _leaves(node: Any, key: str = "", parent_unit: str | None = None):
    """(key, value, unit) of every number: its own key's unit, or the enclosing key's for a mapping's values."""
    if isinstance(node, dict):
        if set(node) == {"value", "unit"}:
            yield key, node["value"], node["unit"]
            return
        unit = unit_of(key) if key else None
        for k, v in node.items():
            yield from _leaves(v, k, unit or parent_unit)
    elif isinstance(node, float | int) and not isinstance(node, bool):
        yield key, node, unit_of(key) or parent_unit


def test_explain_agrees_with_predict_and_the_step_is_the_sum_of_its_parts() -> None:
    doc = _doc()
    r = predict(doc)
    e = json.loads(json.dumps(explain(doc)))  # JSON-able
    assert e["layout"] == r.parallelism
    step = e["terms"]["step"]
    assert e["step_time_s"] == pytest.approx(r.step_time_s, rel=1e-12)
    m = e["terms"]["shape"]["microbatch_count"]
    mb = step["microbatch"]
    assert mb["total_s"] == pytest.approx(mb["compute_s"] + mb["interference_s"] + mb["tp_s"] + mb["cp_s"] + mb["ep_s"]
                                          + mb["pp_s"] + mb["zero_s"], rel=1e-12)
    assert step["step_s"] == pytest.approx(m * mb["total_s"] + step["bubble_s"] + step["dp_exposed_s"]
                                           + step["dp_interference_s"] + step["optimizer_s"] + step["stragglers_s"],
                                           rel=1e-12)
    assert sum(step["breakdown_s"].values()) == pytest.approx(r.step_time_s, rel=1e-12)
    assert step["breakdown_s"] == pytest.approx(r.breakdown_s, rel=1e-12)
    assert e["memory_bytes"] == pytest.approx(r.memory_gb_per_gpu * 1e9, rel=1e-12)


def test_explain_carries_the_zero_tp_and_pp_terms() -> None:
    e = explain(_doc())["terms"]
    z3 = e["zero3"]
    assert z3["per_layer_s"] == pytest.approx(2 * z3["layer_gather_s"] + z3["layer_reduce_scatter_s"], rel=1e-12)
    assert z3["per_microbatch_s"] > 0 and e["memory"]["zero3_buffer_bytes"] > 0
    assert e["tensor_parallel"]["collectives_count"] == 4 and e["tensor_parallel"]["exposed_s"] > 0
    assert e["pipeline"]["raw_s"] > 0 and e["step"]["bubble_s"] > 0
    assert e["framework"]["tp_overlap"] == {"value": 0.0, "unit": "fraction"}
    assert e["framework"]["tp_backward_overlap"] is True


def test_every_number_of_every_term_has_a_unit() -> None:
    e = explain(_doc())
    e.pop("units")
    e.pop("layout")  # the settings, as Result.parallelism names them
    missing = [key for key, _, unit in _leaves(e) if unit is None]
    assert missing == []


def test_a_given_layout_is_explained_instead_of_the_best() -> None:
    doc = scenario(model=LLAMA_7B, training={"zero": "auto", "global_batch": 128, "recompute": "selective"},
                   parallelism={"tp": 4, "pp": 2, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True},
                   cluster={"gpus": 64})
    best = predict(doc)
    assert explain(doc)["layout"] == best.parallelism
    other = 0 if best.parallelism["zero"] else 1
    assert explain(doc, layout={"zero": other})["layout"]["zero"] == other
    with pytest.raises(ScenarioError, match="layout"):
        explain(doc, layout={"tp": 3})
    with pytest.raises(ScenarioError, match="unknown keys"):
        explain(doc, layout={"degree": 3})
