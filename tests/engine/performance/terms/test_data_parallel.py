"""Step-level data-parallel synchronisation (terms/data_parallel.py) with the closed-form collective model."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.frameworks import layout_profiles
from engine.performance.terms.data_parallel import data_parallel_sync
from tests.engine.performance._build import BW, LinearComm, build, dense_doc

P = 1.0e9  # parameters on the stage's GPU


def _sync(zero: int, fwd: float, bwd: float, framework: str = "megatron-core", vpp: int = 1, pp: int = 1):
    ctx, lay, shape = build(dense_doc(zero=zero, framework=framework, vpp=vpp, pp=pp, gb=64))
    comm = LinearComm()
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    return comm, data_parallel_sync(lay, shape, prof, comm, np.array([P]), np.array([fwd]), np.array([bwd]))


def test_zero1_reduce_scatters_fp32_gradients_and_gathers_bf16_weights() -> None:
    comm, dp = _sync(zero=1, fwd=0.0, bwd=0.0)
    assert dp.grad_reduction_s[0] == pytest.approx(P * 4.0 / BW, rel=1e-12)
    assert dp.weight_gather_s[0] == pytest.approx(P * 2.0 / BW, rel=1e-12)
    # no window to hide under: both exposed whole
    assert dp.exposed_s[0] == pytest.approx(P * 6.0 / BW, rel=1e-12)
    assert ("shard", CollectiveKind.REDUCE_SCATTER, P * 4.0) in comm.calls  # the shard group = d c without HSDP


def test_zero0_all_reduces_fp32_gradients_and_gathers_nothing() -> None:
    _, dp = _sync(zero=0, fwd=0.0, bwd=0.0)
    assert dp.grad_reduction_s[0] == pytest.approx(2.0 * P * 4.0 / BW, rel=1e-12)
    assert dp.weight_gather_s[0] == 0.0
    assert dp.exposed_s[0] == pytest.approx(2.0 * P * 4.0 / BW, rel=1e-12)


def test_overlap_leaves_the_last_bucket_exposed() -> None:
    """Megatron-Core buckets of 40M parameters: with a long enough window only 40M / 1e9 of each collective shows,
    and the hidden rest is what interferes with compute."""
    _, dp = _sync(zero=1, fwd=10.0, bwd=10.0)
    bucket = 40e6 / P
    assert dp.bucket_fraction[0] == pytest.approx(bucket)
    assert dp.exposed_s[0] == pytest.approx(bucket * P * 6.0 / BW, rel=1e-12)
    assert dp.hidden_s[0] == pytest.approx((1.0 - bucket) * P * 6.0 / BW, rel=1e-12)


def test_a_short_window_exposes_the_rest() -> None:
    bwd = 0.01
    _, dp = _sync(zero=1, fwd=0.0, bwd=bwd)
    assert dp.exposed_grad_s[0] == pytest.approx(P * 4.0 / BW - bwd, rel=1e-12)


def test_interleaved_chunks_widen_the_window_by_their_cool_down_slots() -> None:
    """v = 2 chunks, p = 2, m >= p: (v-1)/v x min(p, m) = 1 extra micro-batch slot, so the window doubles."""
    bwd = 0.01
    _, dp = _sync(zero=1, fwd=0.0, bwd=bwd, vpp=2, pp=2)
    assert dp.overlap_microbatches[0] == pytest.approx(1.0)
    assert dp.exposed_grad_s[0] == pytest.approx(P * 4.0 / BW - 2.0 * bwd, rel=1e-12)


def test_deepspeed_does_not_overlap_and_zero3_has_no_step_level_sync() -> None:
    _, ds = _sync(zero=1, fwd=10.0, bwd=10.0, framework="deepspeed")
    assert ds.exposed_s[0] == pytest.approx(P * 6.0 / BW, rel=1e-12)
    _, z3 = _sync(zero=3, fwd=0.0, bwd=0.0)
    assert z3.exposed_s[0] == 0.0 and z3.hidden_s[0] == 0.0
    assert z3.grad_elem_bytes[0] == 2.0  # FSDP reduces bf16 gradients


def test_the_window_is_capped_at_the_steps_pure_compute() -> None:
    """v = 2, p = 2: the uncapped window is 2 x bwd = 0.02 s; a step with 0.015 s of pure compute caps it there,
    so the exposed reduction is 4P/BW - 0.015 s (not 4P/BW - 0.02 s)."""
    ctx, lay, shape = build(dense_doc(zero=1, framework="megatron-core", vpp=2, pp=2, gb=64))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    dp = data_parallel_sync(lay, shape, prof, LinearComm(), np.array([P]), np.array([0.0]), np.array([0.01]),
                            step_compute_s=np.array([0.015]))
    assert dp.window_cap_s[0] == pytest.approx(0.015)
    assert dp.exposed_grad_s[0] == pytest.approx(P * 4.0 / BW - 0.015, rel=1e-12)
    # a cap above the window leaves it as it was
    wide = data_parallel_sync(lay, shape, prof, LinearComm(), np.array([P]), np.array([0.0]), np.array([0.01]),
                              step_compute_s=np.array([1.0]))
    assert wide.exposed_grad_s[0] == pytest.approx(P * 4.0 / BW - 0.02, rel=1e-12)


def test_megatron_reduces_the_first_chunk_after_its_last_backward() -> None:
    """v = 4 chunks on a stage whose whole-step window (10 s of backward per micro-batch) hides everything else: the
    first chunk's gradients (4P/BW / 4 = P/BW) are reduced after its last backward, the step's last compute
    (Megatron-LM's grad_sync_func, on by default since 5d745a79cd), so they are exposed whole; without the rule only
    the last 40M-parameter bucket would show (0.04 x 4P/BW)."""
    _, dp = _sync(zero=1, fwd=10.0, bwd=10.0, vpp=4, pp=4)
    assert dp.exposed_grad_s[0] == pytest.approx(P * 4.0 / BW / 4.0, rel=1e-12)
    # the weights: the first chunk's gather hides under its own first forward (10 s / 4): the last bucket shows
    assert dp.exposed_gather_s[0] == pytest.approx(40e6 / P * P * 2.0 / BW, rel=1e-12)


def test_a_stack_that_reduces_during_the_chunks_backward_hides_part_of_it() -> None:
    """Buckets that start during the first chunk's last backward (bwd / v of compute) hide that much of its
    gradients: (G - bwd) / v with G = 4P/BW; its weights hide under its first forward: (A - fwd) / v, A = 2P/BW."""
    import dataclasses

    g, a = P * 4.0 / BW, P * 2.0 / BW
    fwd, bwd = a / 2.0, g / 2.0  # half of each collective's time, so that each chunk floor is a quarter of it / v
    ctx, lay, shape = build(dense_doc(zero=1, framework="megatron-core", vpp=4, pp=4, gb=64))
    prof = dataclasses.replace(layout_profiles(ctx.framework, lay.tp, lay.pp),
                               grad_sync_after_chunk=np.array([False]))
    far = np.array([1e9])  # a whole-step window that hides everything but the first chunk's part
    dp = data_parallel_sync(lay, shape, prof, LinearComm(), np.array([P]), np.array([fwd]), np.array([bwd]),
                            step_compute_s=far)
    assert dp.overlap_microbatches[0] == pytest.approx(3.0)  # (v-1)/v x min(p, m) = 3 extra slots
    # whole-step windows: 4 x bwd = 2G >= G, 4 x fwd = 2A >= A: only the first-chunk floors bind
    assert dp.exposed_grad_s[0] == pytest.approx((g - bwd) / 4.0, rel=1e-12)
    assert dp.exposed_gather_s[0] == pytest.approx((a - fwd) / 4.0, rel=1e-12)


def test_one_chunk_keeps_the_steps_own_window() -> None:
    """v = 1: the first chunk is the whole stage, and its floor (G - bwd) is the step-level rule already in place."""
    from engine.performance.terms.data_parallel import first_chunk_exposure

    grad, gather = first_chunk_exposure(np.array([1.0]), np.array([3.0]), np.array([2.0]), np.array([0.5]),
                                        np.array([1.0]), np.array([True]))
    assert grad[0] == pytest.approx(2.0) and gather[0] == pytest.approx(1.5)
    grad4, gather4 = first_chunk_exposure(np.array([4.0]), np.array([3.0]), np.array([2.0]), np.array([0.5]),
                                          np.array([1.0]), np.array([True]))
    assert grad4[0] == pytest.approx(0.75) and gather4[0] == pytest.approx(1.5 / 4.0)
