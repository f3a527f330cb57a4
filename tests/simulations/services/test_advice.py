"""A dead-end layout is told by the error's code and field, never by the wording of its message."""

from __future__ import annotations

from engine.errors import INVALID, LAYOUT_CONFLICT, NO_LAYOUT, ScenarioError


def test_the_code_decides() -> None:
    from simulations.services.advice import is_dead_end_error, is_layout_dead_end

    assert is_layout_dead_end(field="parallelism", code=NO_LAYOUT)
    assert not is_layout_dead_end(field="parallelism", code=LAYOUT_CONFLICT)
    # the message is not read: any wording, or none
    assert is_layout_dead_end(field="parallelism", code=NO_LAYOUT, error="(reworded)")
    assert not is_layout_dead_end(field="parallelism.tp", error="no layout satisfies the fixed settings")
    # a stored run keeps only the field: the whole layout may be the dead end (the engine then says whether)
    assert is_layout_dead_end(field="parallelism") and is_layout_dead_end(field="parallelism", code=INVALID)
    assert is_dead_end_error(ScenarioError("parallelism", "anything", NO_LAYOUT))
    assert not is_dead_end_error(ScenarioError("cluster.gpus", "anything", NO_LAYOUT[::-1]))
    assert not is_dead_end_error(ValueError("no layout satisfies"))


def test_advice_only_when_the_gpu_count_really_has_no_layout() -> None:
    from simulations.services.advice import gpu_count_advice
    from tests.engine._scenarios import scenario

    dead = scenario(training={"global_batch": 2048, "micro_batch": "auto"}, parallelism="auto",
                    cluster={"gpus": 1000})
    advice = gpu_count_advice(document=dead, catalog=None)
    assert advice is not None and advice["requested"] == 1000 and advice["below"] < 1000
    assert gpu_count_advice(document=scenario(), catalog=None) is None  # 64 GPUs have a layout
