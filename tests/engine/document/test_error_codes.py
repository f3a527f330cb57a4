"""Every parser error carries a machine code beside its message (engine.errors); callers read the code."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

from engine import errors
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from tests.engine._scenarios import scenario


def _code(mutate: Callable[[dict[str, Any]], Any]) -> ScenarioError:
    doc = scenario()
    mutate(doc)
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(doc)
    return exc.value


@pytest.mark.parametrize(("mutate", "field", "code"), [
    (lambda d: d["model"].pop("layers"), "model.layers", errors.REQUIRED),
    (lambda d: d["cluster"].update(speed=3), "cluster.speed", errors.UNKNOWN_KEY),
    (lambda d: d["model"].update(layers="many"), "model.layers", errors.WRONG_TYPE),
    (lambda d: d["model"].update(layers=True), "model.layers", errors.WRONG_TYPE),
    (lambda d: d["model"].update(hidden=0), "model.hidden", errors.OUT_OF_RANGE),
    (lambda d: d["cluster"].update(gpus=float("nan")), "cluster.gpus", errors.OUT_OF_RANGE),
    (lambda d: d["training"].update(precision="fp4"), "training.precision", errors.NOT_A_CHOICE),
    (lambda d: d["cluster"].update(gpu="H999"), "cluster.gpu", errors.UNKNOWN_CATALOG_KEY),
    (lambda d: d.update(costs={"prices": {"QM9999": 1}}), "costs.prices.QM9999", errors.UNKNOWN_CATALOG_KEY),
    (lambda d: d["parallelism"].update(tp=3), "parallelism.tp", errors.LAYOUT_CONFLICT),
    (lambda d: (d["cluster"].update(tiers=1, gpus=4096), d["training"].update(global_batch=4096)), "cluster.gpus",
     errors.UNBUILDABLE_FABRIC),
    (lambda d: d["cluster"].update(fabric="roce", switch="TH5-51T", routing="adaptive"), "cluster.routing",
     errors.UNBUILDABLE_FABRIC),
    (lambda d: d["costs"].update(pue={"low": 1.4, "high": 1.2}) if d.get("costs") else d.update(
        costs={"pue": {"low": 1.4, "high": 1.2}}), "costs.pue", errors.INVALID),
])
def test_the_code_of_each_kind_of_error(mutate: Callable[[dict[str, Any]], Any], field: str, code: str) -> None:
    exc = _code(mutate)
    assert (exc.field, exc.code) == (field, code), str(exc)
    assert code in errors.CODES


def test_the_default_code_and_pickling() -> None:
    exc = ScenarioError("cluster", "bad")
    assert exc.code == errors.INVALID and str(exc) == "cluster: bad"
    coded = pickle.loads(pickle.dumps(ScenarioError("parallelism", "no layout", errors.NO_LAYOUT)))
    assert (coded.field, coded.message, coded.code) == ("parallelism", "no layout", errors.NO_LAYOUT)
