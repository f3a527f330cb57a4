"""Awkward sizes (issue #24 item 3): a GPU count and batch that factor badly are flagged by a closed-form rule,
and the nearest sizes and batches that factor well are the integers worked out by hand here.

The workload is Llama 3 70B (80 layers, 64 heads, 8,192-token sequence) at a global batch of 2,048 = 2¹¹: tensor
parallelism (divisors of 64), context parallelism (divisors of 8,192) and data parallelism (divisors of 2,048) take
only powers of two, so the odd part of the GPU count is the fewest pipeline stages any layout can use.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.performance.advice import nearest_batches
from engine.performance.api import predict
from engine.performance.sizing_advice import (
    Factoring,
    factoring_of,
    nearest_well_factored,
    sizing_advice,
    stage_balance,
)

LLAMA_70B: dict[str, Any] = {
    "name": "Llama-3-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
    "gated_ffn": True, "vocab": 128256, "seq_len": 8192,
}


def doc(gpus: int, gpu: str = "GB300", batch: int = 2048, parallelism: Any = "auto") -> dict[str, Any]:
    return {"model": copy.deepcopy(LLAMA_70B), "training": {"global_batch": batch, "tokens": 1.5e13},
            "parallelism": parallelism, "cluster": {"gpu": gpu, "gpus": gpus}}


def test_stage_balance_is_the_share_of_layer_slots_used() -> None:
    assert stage_balance(80, 63) == pytest.approx(80 / 126)  # 2 layers on the busiest of 63 stages
    assert stage_balance(80, 9) == pytest.approx(80 / 81)
    assert stage_balance(80, 8) == 1.0
    assert stage_balance(80, 15) == pytest.approx(80 / 90)  # 6 on the busiest: uneven by more than a tenth


@pytest.mark.parametrize(("gpus", "min_pp", "well"), [
    (2016, 63, False),  # 2⁵ × 63: 1.27 layers per stage
    (2048, 1, True),    # 2¹¹: no pipeline needed
    (2304, 9, True),    # 2⁸ × 9: 8.9 layers per stage, balance 80/81
    (1728, 27, False),  # 2⁶ × 27: 2.96 layers per stage (< 4)
    (1920, 15, False),  # 2⁷ × 15: 5.3 per stage but 80/90 = 0.89 < 0.90
    (1792, 7, True),    # 2⁸ × 7: 11.4 per stage, balance 80/84
    (1944, 0, False),   # 2³ × 243: 243 stages > 80 layers, no layout at all
])
def test_the_odd_part_lands_on_the_pipeline(gpus: int, min_pp: int, well: bool) -> None:
    fact = factoring_of(doc(gpus), gpus)
    assert fact.min_pp == min_pp
    assert fact.well is well


def test_rule_thresholds_in_closed_form() -> None:
    assert not Factoring(21, 80).well and Factoring(20, 80).well  # 80 < 4 × 21; 80 = 4 × 20, balance 1
    assert Factoring(1, 3).well  # one stage is always fine
    assert not Factoring(0, 80).well  # no layout


def test_nearest_well_factored_gpu_counts_on_nvl72_racks() -> None:
    d = doc(2016)
    # whole racks of 72 below 2,016: 1,944 (243), 1,872 (117), 1,800 (225), 1,656 (207), 1,584 (99), 1,512 (189),
    # 1,368 (171), 1,296 (81), 1,224 (153) leave more stages than layers; 1,728 (27) and 1,440 (45) leave < 4
    # layers per stage; 1,152 = 2⁷ × 9 is the first that factors well. Above: 2,088 (261), 2,160 (135), 2,232 (279)
    # have no layout; 2,304 = 2⁸ × 9.
    assert nearest_well_factored(d, 2016, 72, 72) == (1152, 2304)
    # 64 of 72 per rack: 1,984 (31) and 1,856 (29) leave < 4 per stage, 1,920 (15) is uneven; 1,792 = 2⁸ × 7 on the
    # same 28 racks; above, 2,048 = 2¹¹
    assert nearest_well_factored(d, 2016, 72, 64) == (1792, 2048)


def test_nearest_well_factored_gpu_counts_on_hgx_servers() -> None:
    # 360 = 2³ × 45 on H100 servers of 8; below, 352 = 2⁵ × 11 (7.3 per stage, 80/88); above, 368 (23) and 376 (47)
    # leave < 4 per stage, 384 = 2⁷ × 3
    assert factoring_of(doc(360, "H100-SXM"), 360).min_pp == 45
    assert nearest_well_factored(doc(360, "H100-SXM"), 360, 8, 8) == (352, 384)


def test_nearest_batches_are_multiples_of_the_missing_factor() -> None:
    # 2,016 / gcd(2,016, 2,048) = 63: batches 2,016 = 32 × 63 and 2,079 = 33 × 63 let data parallelism take the 63
    assert nearest_batches(2016, 2048, lambda b: factoring_of(doc(2016), 2016, b).well) == (2016, 2079)
    assert nearest_batches(2048, 2048, lambda b: True) == (None, None)  # nothing missing: the batch is not the cause
    # 1,000 / gcd(1,000, 64) = 125: nothing below within half the batch, 125 above within twice it
    assert nearest_batches(1000, 64, lambda b: True) == (None, 125)
    assert nearest_batches(1000, 64, lambda b: False) == (None, None)


def test_2016_gb300_is_flagged_with_the_nearest_sizes_and_their_mfu() -> None:
    awkward = predict(doc(2016))
    assert awkward.parallelism["pp"] == 63
    advice = sizing_advice(doc(2016), mfu=awkward.mfu)
    assert advice is not None
    by_size = {(o.gpus, o.batch): o for o in advice.options}
    assert set(by_size) == {(1152, 2048), (1792, 2048), (2048, 2048), (2304, 2048), (2016, 2016), (2016, 2079)}
    assert (by_size[(1792, 2048)].nodes, by_size[(1792, 2048)].per_node) == (28, 64)
    assert (by_size[(2304, 2048)].nodes, by_size[(2304, 2048)].per_node) == (32, 72)
    # each option is the engine's own prediction at that size (a 64-of-72 size as the document runs it with
    # cluster.gpus_per_rack = 64: NVLink domains of 64), and every one of them beats the awkward size
    for (gpus, batch), option in by_size.items():
        sized = doc(gpus, batch=batch)
        if option.per_node < 72:
            sized["cluster"]["gpus_per_rack"] = option.per_node
        assert option.mfu == pytest.approx(predict(sized).mfu)
        assert option.mfu is not None and awkward.mfu is not None and option.mfu > awkward.mfu
    text = advice.message()
    assert "2,016 GPUs (2⁵ × 3² × 7)" in text and "global batch of 2,048" in text
    assert "at least 63 pipeline stages for 80 layers (2 on the busiest stage, 1.27 on average" in text
    assert f"predicted MFU {awkward.mfu * 100:.1f}%" in text
    assert "1,792 GPUs, 64 of 72 in each of 28 racks, 224 spares (set cluster.gpus_per_rack = 64)" in text
    assert "2,304 GPUs (32 whole racks)" in text and "global batch 2,016 on the same GPUs" in text


@pytest.mark.parametrize("gpus", [2048, 2304, 1152, 144])
def test_sizes_that_factor_well_get_no_advice(gpus: int) -> None:
    assert sizing_advice(doc(gpus)) is None


def test_a_fixed_pipeline_is_the_planners_choice() -> None:
    fixed = {"tp": 2, "pp": 63, "cp": 4, "ep": 1, "vpp": 1}
    assert sizing_advice(doc(2016, parallelism=fixed)) is None


def test_a_count_without_any_layout_is_left_to_the_dead_end_advice() -> None:
    assert sizing_advice(doc(1944)) is None


def test_a_chosen_pipeline_that_passes_the_rule_ends_the_check() -> None:
    from engine.performance.sizing_advice import chosen_pipeline_is_fine

    assert chosen_pipeline_is_fine(doc(2016), {"pp": 8}) and not chosen_pipeline_is_fine(doc(2016), {"pp": 63})
    # trusted as given: the prediction's own layout is the evidence, no parse
    assert sizing_advice(doc(2016), chosen={"pp": 8}) is None
    assert sizing_advice(doc(2016), chosen={"pp": 63}) is not None
