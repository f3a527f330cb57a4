"""Dead-end advice offers the nearest global batches when the batch is what fails (issue #24 item 3)."""

from __future__ import annotations

from engine.errors import ScenarioError
from engine.performance.advice import nearest_workable_gpus
from engine.performance.api import predict
from tests.engine._scenarios import scenario
from tests.engine.performance.test_advice import LLAMA_70B


def _doc(gpus: int, batch: int = 2048) -> dict:
    return scenario(model=LLAMA_70B, training={"global_batch": batch, "micro_batch": "auto"}, parallelism="auto",
                    cluster={"gpus": gpus})


def _runs(gpus: int, batch: int) -> bool:
    try:
        predict(_doc(gpus, batch))
    except ScenarioError as exc:
        assert exc.field == "parallelism"
        return False
    return True


def test_thousand_gpus_offer_the_nearest_batches_that_have_a_layout() -> None:
    # 1,000 = 2³ × 5³ and 2,048 = 2¹¹: data parallelism cannot take the 125. The batch must be a multiple of
    # 1,000 / gcd(1,000, 2,048) = 125: 2,000 = 16 × 125 below, 2,125 = 17 × 125 above.
    advice = nearest_workable_gpus(_doc(1000))
    assert (advice.batch, advice.batch_below, advice.batch_above) == (2048, 2000, 2125)
    assert _runs(1000, 2000) and _runs(1000, 2125) and not _runs(1000, 2048)
    text = advice.message()
    assert "keep 1,000 GPUs with a global batch of 2,000 or 2,125 instead of 2,048" in text
    d = advice.to_dict()
    assert (d["batch_below"], d["batch_above"]) == (2000, 2125) and d["message"] == text


def test_a_fixed_micro_batch_counts_the_batch_in_micro_batches() -> None:
    # tp = 8, pp = cp = 1 fixed: dp = 1,000 / 8 = 125 ranks of 16-sequence micro-batches, so the batch must be a
    # multiple of 125 x 16 = 2,000: 2,000 below 3,200 and 4,000 above (3,200 / 16 = 200 micro-batches, step 5)
    fixed = {"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True}
    doc = scenario(model=LLAMA_70B, training={"global_batch": 3200, "micro_batch": 16}, parallelism=fixed,
                   cluster={"gpus": 1000})
    advice = nearest_workable_gpus(doc)
    assert not advice.workable
    assert (advice.batch_below, advice.batch_above) == (2000, 4000)


def test_no_batch_is_offered_when_the_batch_has_every_factor() -> None:
    # 1,000 GPUs at 3,000 sequences (a multiple of 1,000) but dp fixed at 64, which divides neither: only the GPU
    # count can change, no batch helps
    fixed = {"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True, "dp": 64}
    doc = scenario(model=LLAMA_70B, training={"global_batch": 3000, "micro_batch": 1}, parallelism=fixed,
                   cluster={"gpus": 1000})
    advice = nearest_workable_gpus(doc)
    assert not advice.workable and advice.batch_below is None and advice.batch_above is None
    assert "global batch of" not in advice.message().split("Way out:")[1]
