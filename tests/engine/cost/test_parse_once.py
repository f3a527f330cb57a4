"""The cost model takes what the caller already has: a parsed Scenario and predict's result (issue #21).

``tco(scenario, performance=predict(scenario))`` must give exactly what ``tco(document)`` gives, without parsing,
sizing the fabric or running the performance model again; Monte Carlo and sensitivity alone parse once.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.catalog import default_catalog
from engine.cost.costing import perf_point
from engine.cost.tco import tco
from engine.cost.uncertainty import monte_carlo, sensitivity
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import predict
from tests.engine._scenarios import LLAMA_7B, scenario
from tests.engine.cost._engine_calls import engine_calls
from tests.engine.cost.test_tco import reference


def _auto_layout() -> dict[str, Any]:
    """"auto" parallelism (the search), ranged costs and a rail-optimized fabric."""
    doc = scenario(model=LLAMA_7B, training={"global_batch": 512, "micro_batch": "auto", "recompute": "auto",
                                             "zero": "auto", "tokens": 1e12},
                   parallelism="auto", cluster={"gpus": 256, "topology": "rail-optimized", "nic_gbps": 400})
    doc["costs"] = {"usd_per_kwh": {"low": 0.06, "likely": 0.08, "high": 0.12}, "pue": 1.3}
    return doc


DOCUMENTS = {"fixed layout, 3-tier fat-tree": reference, "auto layout, ranged costs": _auto_layout}


@pytest.mark.parametrize("catalog", [None, "custom"], ids=["engine catalog", "catalog values"])
@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_tco_of_a_parsed_scenario_and_its_prediction_is_the_tco_of_the_document(name: str, catalog: Any) -> None:
    doc = DOCUMENTS[name]()
    cat = copy.deepcopy(default_catalog()) if catalog else None
    with engine_calls() as whole:
        expected = tco(copy.deepcopy(doc), catalog=cat)
    assert whole.counts() == (1, 1, 1), str(whole)
    with engine_calls() as calls:
        s = parse_scenario(doc, cat)
        result = predict(s, catalog=cat)
        out = tco(s, catalog=cat, performance=result)
    assert calls.counts() == (1, 1, 1), str(calls)
    assert out == expected
    assert out["performance"] == result.to_dict()


def test_perf_point_takes_the_prediction() -> None:
    s = parse_scenario(reference())
    result = predict(s)
    with engine_calls() as calls:
        point = perf_point(s, performance=result)
    assert calls.counts() == (0, 0, 0), str(calls)
    assert point.performance == perf_point(reference()).performance == result.to_dict()


def test_monte_carlo_and_sensitivity_need_the_document() -> None:
    s = parse_scenario(reference())
    for options in ({"monte_carlo": 10}, {"sensitivity": True}):
        with pytest.raises(ScenarioError) as exc:
            tco(s, **options)
        assert exc.value.field == "scenario" and "document" in exc.value.message
    with pytest.raises(ScenarioError):
        tco(["not", "a", "scenario"])  # type: ignore[arg-type]


def test_monte_carlo_and_sensitivity_alone_parse_once_and_match_tco() -> None:
    doc = reference(nic_gbps=400)
    doc["costs"]["usd_per_kwh"] = {"low": 0.05, "likely": 0.08, "high": 0.12}
    with engine_calls() as calls:
        band = monte_carlo(doc, samples=200, seed=3)
    assert calls.counts() == (1, 1, 1), str(calls)  # cost ranges only: one performance point
    with engine_calls() as calls:
        tornado = sensitivity(doc)
    assert calls.counts() == (1, 1, 1), str(calls)
    both = tco(doc, monte_carlo=200, seed=3, sensitivity=True)
    assert band == both["monte_carlo"] and tornado == both["sensitivity"]
