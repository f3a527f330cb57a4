"""Pipeline parallelism (terms/pipeline.py): the bottleneck stage, send/recv and the 1F1B bubble."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.frameworks import layout_profiles
from engine.performance.terms.pipeline import bottleneck_stage, pipeline_bubble, pipeline_comm
from tests.engine._scenarios import LLAMA_7B
from tests.engine.performance._build import BW, LinearComm, build, dense_doc


def _stage(doc: dict, logits_s: float, uneven: bool, layer_s: float = 1.0) -> float:
    """The bottleneck stage's share of the model's time per micro-batch (layer 1 s, comm 0 s)."""
    ctx, lay, shape = build(doc)
    stage = bottleneck_stage(ctx, lay, shape, np.array([layer_s]), np.array([0.0]), np.array([logits_s]), 0.0,
                             np.array([uneven]))
    return float(stage.model_fraction[0])


def test_stage_of_whole_layers_is_the_bottleneck_when_layers_do_not_split_evenly() -> None:
    """30 layers over p = 4: the bottleneck rank holds ceil(30/4) = 8 layers, 8 x 1.5 = 12 of the model's 45 s of
    layer time (more than the even share 45/4); with logits worth 10 layers (15 s) the best whole-layer split gives
    the last rank no layer: 10 + 10 + 10 + (0 + 10), 15 of the model's 60 s."""
    ctx, lay, shape = build(dense_doc(pp=4, tp=8, gpus=64, gb=64, model=dict(LLAMA_7B, layers=30)))
    assert shape.stage_layers[0] == 8
    uneven = np.array([True])
    stage = bottleneck_stage(ctx, lay, shape, np.array([1.0]), np.array([0.5]), np.array([0.0]), 0.0, uneven)
    assert stage.model_fraction[0] == pytest.approx(12.0 / 45.0, rel=1e-12)
    assert stage.compute_s[0] == pytest.approx(12.0 / 45.0 * 30.0, rel=1e-12)
    heavy = bottleneck_stage(ctx, lay, shape, np.array([1.0]), np.array([0.5]), np.array([15.0]), 0.0, uneven)
    assert heavy.model_fraction[0] == pytest.approx(0.25, rel=1e-12)
    assert heavy.compute_s[0] == pytest.approx(0.25 * (30.0 + 15.0), rel=1e-12)


def test_output_layer_runs_on_the_last_rank_beside_its_layers_when_the_split_is_even() -> None:
    """Megatron-LM before its uneven split (2024-09): 32 layers over p = 4, every rank 8 layers, the last one the
    output layer (0.5 s) too: 8.5 of the model's 32.5 s (not the even share 32.5 / 4 = 8.125)."""
    doc = dense_doc(pp=4, tp=8, gpus=64, gb=64, model=dict(LLAMA_7B, layers=32))
    assert _stage(doc, 0.5, uneven=False) == pytest.approx(8.5 / 32.5, rel=1e-12)


def test_best_whole_layer_split_sheds_layers_from_the_last_rank() -> None:
    """A stack that can split unevenly, 32 layers over p = 4, output layer worth 2 layers: 9 + 9 + 9 + (5 + 2), so the
    slowest rank holds 9 of the model's 34 layers' worth (no whole-layer split reaches the even share 8.5)."""
    doc = dense_doc(pp=4, tp=8, gpus=64, gb=64, model=dict(LLAMA_7B, layers=32))
    assert _stage(doc, 2.0, uneven=True) == pytest.approx(9.0 / 34.0, rel=1e-12)
    # the even split carries all of it: 8 + 2
    assert _stage(doc, 2.0, uneven=False) == pytest.approx(10.0 / 34.0, rel=1e-12)


def test_interleaved_split_sheds_whole_chunks_only() -> None:
    """80 layers, p = 8, v = 5 (2 layers per virtual stage), output layer worth 1.1 layers: the other ranks keep 2 per
    chunk (10 layers), the last holds 80 - 70 = 10 and the output layer: 11.1 of 81.1; with 3 per chunk the others
    would hold 15. The even share 81.1 / 8 = 10.14 is out of reach."""
    doc = dense_doc(pp=8, tp=8, vpp=5, gpus=64 * 8, gb=64, model=dict(LLAMA_7B, layers=80))
    assert _stage(doc, 1.1, uneven=True) == pytest.approx(11.1 / 81.1, rel=1e-12)


def test_embedding_and_loss_in_the_split_leave_the_last_rank_one_layer_less() -> None:
    """30 layers + 2 places over p = 4: 8 places a rank, the last one 7 layers and the output layer. Worth 0.5 layers
    it does not bind (a middle rank's 8 layers do); worth 3 it does: 7 + 3 = 10 of 33."""
    doc = dense_doc(pp=4, tp=8, gpus=64, gb=64, model=dict(LLAMA_7B, layers=30))
    doc["parallelism"]["embedding_loss_in_split"] = True
    assert _stage(doc, 0.5, uneven=True) == pytest.approx(8.0 / 30.5, rel=1e-12)
    assert _stage(doc, 3.0, uneven=True) == pytest.approx(10.0 / 33.0, rel=1e-12)


def test_without_a_pipeline_the_rank_holds_the_whole_model() -> None:
    assert _stage(dense_doc(pp=1, tp=8, gpus=64, gb=64), 3.0, uneven=False) == pytest.approx(1.0, rel=1e-12)


def test_send_recv_per_microbatch_is_two_transfers_per_virtual_stage() -> None:
    """Megatron scatter/gather: each TP rank sends M h 2 B / t, forward and backward, per virtual stage. Megatron-LM
    of 2023-01: interleaved (dd88906264, 2021-02) but its p2p not yet overlapped (f9283c5a8a, 2023-05)."""
    ctx, lay, shape = build(dense_doc(pp=4, tp=8, vpp=2, gpus=64, gb=64, framework="megatron-core",
                                      framework_release="2023-01"))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, ctx.framework_release)
    pp = pipeline_comm(ctx, lay, shape, prof, LinearComm())
    nbytes = 4096 * 4096 * 2.0 / 8
    assert pp.transfer_bytes[0] == pytest.approx(nbytes, rel=1e-12)
    assert pp.raw_s[0] == pytest.approx(2 * 2 * nbytes / BW, rel=1e-12)
    assert pp.hideable_s[0] == 0.0  # no p2p overlap before 2023-05


@pytest.mark.parametrize("release", ["2021-10", "2025-02"])
def test_deepspeeds_blocking_sends_and_receives_are_four_transfers_per_microbatch(release: str) -> None:
    """DeepSpeed's pipeline engine (1F1B, no virtual stages): each send and receive blocks alone (pipe/p2p.py), and a
    middle rank receives the activation, sends the gradient back, sends its activation on and receives that gradient:
    4 x M h 2 B / t per micro-batch in a row, none hidden (Megatron's batched pairs: 2)."""
    ctx, lay, shape = build(dense_doc(pp=4, tp=8, gpus=64, gb=64, zero=1, framework="deepspeed",
                                      framework_release=release))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, ctx.framework_release)
    pp = pipeline_comm(ctx, lay, shape, prof, LinearComm())
    nbytes = 4096 * 4096 * 2.0 / 8
    assert pp.raw_s[0] == pytest.approx(4 * nbytes / BW, rel=1e-12)
    assert pp.hideable_s[0] == 0.0
    megatron = build(dense_doc(pp=4, tp=8, gpus=64, gb=64, framework="megatron-core", framework_release="2023-01"))
    prof_m = layout_profiles(megatron[0].framework, megatron[1].tp, megatron[1].pp, megatron[0].framework_release)
    assert pipeline_comm(*megatron, prof_m, LinearComm()).raw_s[0] == pytest.approx(2 * nbytes / BW, rel=1e-12)


def test_interleaved_overlap_hides_all_but_one_transfer() -> None:
    ctx, lay, shape = build(dense_doc(pp=4, tp=8, vpp=2, gpus=64, gb=64, framework="megatron-core"))
    pp = pipeline_comm(ctx, lay, shape, layout_profiles(ctx.framework, lay.tp, lay.pp), LinearComm())
    assert pp.hideable_s[0] == pytest.approx(pp.raw_s[0])
    assert pp.floor_s[0] == pytest.approx(pp.raw_s[0] / 4, rel=1e-12)


def test_bubble_is_p_minus_1_over_v_microbatch_slots() -> None:
    _, lay, _ = build(dense_doc(pp=4, tp=8, vpp=2, gpus=64, gb=64))
    assert pipeline_bubble(lay, np.array([0.2]))[0] == pytest.approx(3 / 2 * 0.2, rel=1e-12)


def test_the_tails_layers_add_their_communication_to_the_last_rank() -> None:
    """An even split (8 of 32 layers a rank, the last the tail too), layers of 1 s compute + 0.5 s communication: a
    tail of 3 s compute and 2 layers' communication (MTP modules' layers) is 3 + 2 x 0.5 = 4 s on the last rank, which
    binds with 8 x 1.5 + 4 = 16 of the model's 32 x 1.5 + 4 = 52 s; its per-layer communication runs over that share
    of L + 2 layers, its compute over that share of 32 + 3 s."""
    ctx, lay, shape = build(dense_doc(pp=4, tp=8, gpus=64, gb=64, model=dict(LLAMA_7B, layers=32)))
    stage = bottleneck_stage(ctx, lay, shape, np.array([1.0]), np.array([0.5]), np.array([3.0]), 2.0,
                             np.array([False]))
    share = 16.0 / 52.0
    assert stage.model_fraction[0] == pytest.approx(share, rel=1e-12)
    assert stage.compute_s[0] == pytest.approx(share * 35.0, rel=1e-12)
    assert stage.per_microbatch(ctx, np.array([0.5]))[0] == pytest.approx(share * 34 * 0.5, rel=1e-12)
