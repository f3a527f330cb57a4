"""One limit per quantity: a field that is the same quantity under another name takes the table's bound."""

from __future__ import annotations

import pytest

from engine.errors import OUT_OF_RANGE, WRONG_TYPE
from engine.schema.bounds import BOUNDS, BoundError, check_field


def test_queue_pairs_have_one_bound_everywhere() -> None:
    qps = BOUNDS["cluster.qps_per_connection"]
    assert BOUNDS["fabric_study.qps"] is qps and BOUNDS["params.qps"] is qps and qps.hi == 128


def test_check_field_like_names_the_field_and_keeps_the_bound() -> None:
    assert check_field(128, "qps", like="cluster.qps_per_connection") == 128
    with pytest.raises(BoundError) as exc:
        check_field(129, "qps", like="cluster.qps_per_connection")
    assert exc.value.field == "qps" and exc.value.code == OUT_OF_RANGE and "128" in exc.value.message
    with pytest.raises(BoundError) as exc:
        check_field(True, "seeds", like="fabric_study.seeds")
    assert exc.value.field == "seeds" and exc.value.code == WRONG_TYPE


def test_the_flow_simulator_takes_its_limits_from_the_table() -> None:
    from engine.flowsim.simulate import simulate
    from tests.engine._scenarios import scenario

    doc = scenario(cluster={"gpus": 64})
    for kwargs, name, hi in (({"qps": 129}, "qps", 128), ({"seeds": BOUNDS["fabric_study.seeds"].hi + 1}, "seeds",
                                                             BOUNDS["fabric_study.seeds"].hi)):
        with pytest.raises(BoundError) as exc:
            simulate(doc, ranks=16, **kwargs)  # type: ignore[arg-type]
        assert exc.value.field == name and f"{int(hi):,}" in exc.value.message
    # up to the table's 128 (the simulator used to stop at 64, below what a scenario may ask for)
    assert simulate(doc, ranks=16, routing="ecmp-qp", qps=96, seeds=1)["inputs"]["qps"] == 96
