"""Dead-end advice: the nearest GPU counts with a valid layout, checked against predict itself."""

from __future__ import annotations

import pytest

from engine.errors import ScenarioError
from engine.performance.advice import nearest_workable_gpus
from engine.performance.api import predict
from tests.engine._scenarios import scenario

LLAMA_70B = {"name": "Llama-3-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
             "gated_ffn": True, "vocab": 128256, "seq_len": 8192}


def _doc(gpus: int) -> dict:
    return scenario(model=LLAMA_70B, training={"global_batch": 2048, "micro_batch": "auto"}, parallelism="auto",
                    cluster={"gpus": gpus})


def _predict_ok(gpus: int) -> bool:
    try:
        predict(_doc(gpus))
    except ScenarioError as exc:
        assert exc.field == "parallelism"
        return False
    return True


def test_thousand_gpus_has_no_layout_and_the_nearest_counts_do() -> None:
    advice = nearest_workable_gpus(_doc(1000))
    assert not advice.workable
    assert advice.below is not None and advice.above is not None
    assert advice.below < 1000 < advice.above
    assert advice.below % 8 == 0 and advice.above % 8 == 0
    # the engine itself agrees: the two counts run, every whole-server count between them does not
    assert _predict_ok(advice.below) and _predict_ok(advice.above)
    for n in range(advice.below + 8, advice.above, 8):
        assert not _predict_ok(n), n
    assert advice.spares == 1000 - advice.below


def test_message_explains_in_planner_terms_and_offers_the_way_out() -> None:
    advice = nearest_workable_gpus(_doc(1000))
    text = advice.message()
    assert "1,000 GPUs" in text and "2³ × 5³" in text
    assert "global batch of 2,048" in text and "64 attention heads" in text
    assert f"{advice.below:,} and {advice.above:,}" in text
    assert f"run on {advice.below:,} of the 1,000 GPUs" in text and f"{advice.spares:,} as spares" in text
    assert advice.to_dict()["message"] == text


def test_a_workable_count_needs_no_advice() -> None:
    advice = nearest_workable_gpus(scenario(cluster={"gpus": 64}))
    assert advice.workable and advice.message() == "" and advice.below is None


@pytest.mark.parametrize("fixed", [{"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True}])
def test_fixed_settings_are_respected(fixed: dict) -> None:
    doc = scenario(model=LLAMA_70B, training={"global_batch": 2048, "micro_batch": 1}, parallelism=fixed,
                   cluster={"gpus": 1000})
    advice = nearest_workable_gpus(doc)
    assert not advice.workable and "fixes tp = 8" in advice.reason
    assert advice.below is not None and (advice.below // 8) & (advice.below // 8 - 1) == 0  # dp = a power of two
