"""Pipeline parallelism (terms/pipeline.py): the bottleneck stage, send/recv and the 1F1B bubble."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.frameworks import layout_profiles
from engine.performance.terms.pipeline import bottleneck_stage, pipeline_bubble, pipeline_comm
from tests.engine._scenarios import LLAMA_7B
from tests.engine.performance._build import BW, LinearComm, build, dense_doc


def test_stage_of_whole_layers_is_the_bottleneck_when_layers_do_not_split_evenly() -> None:
    """30 layers over p = 4: the bottleneck rank holds ceil(30/4) = 8 layers, 8 x 1.5 = 12 of the model's 45 s of
    layer time (more than the even share 45/4); with large logits the even share (45 + 15)/4 = 15 binds instead."""
    ctx, lay, shape = build(dense_doc(pp=4, tp=8, gpus=64, gb=64, model=dict(LLAMA_7B, layers=30)))
    assert shape.stage_layers[0] == 8
    stage = bottleneck_stage(ctx, lay, shape, np.array([1.0]), np.array([0.5]), np.array([0.0]))
    assert stage.model_fraction[0] == pytest.approx(12.0 / 45.0, rel=1e-12)
    assert stage.compute_s[0] == pytest.approx(12.0 / 45.0 * 30.0, rel=1e-12)
    heavy = bottleneck_stage(ctx, lay, shape, np.array([1.0]), np.array([0.5]), np.array([15.0]))
    assert heavy.model_fraction[0] == pytest.approx(0.25, rel=1e-12)
    assert heavy.compute_s[0] == pytest.approx(0.25 * (30.0 + 15.0), rel=1e-12)


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


def test_interleaved_overlap_hides_all_but_one_transfer() -> None:
    ctx, lay, shape = build(dense_doc(pp=4, tp=8, vpp=2, gpus=64, gb=64, framework="megatron-core"))
    pp = pipeline_comm(ctx, lay, shape, layout_profiles(ctx.framework, lay.tp, lay.pp), LinearComm())
    assert pp.hideable_s[0] == pytest.approx(pp.raw_s[0])
    assert pp.floor_s[0] == pytest.approx(pp.raw_s[0] / 4, rel=1e-12)


def test_bubble_is_p_minus_1_over_v_microbatch_slots() -> None:
    _, lay, _ = build(dense_doc(pp=4, tp=8, vpp=2, gpus=64, gb=64))
    assert pipeline_bubble(lay, np.array([0.2]))[0] == pytest.approx(3 / 2 * 0.2, rel=1e-12)
