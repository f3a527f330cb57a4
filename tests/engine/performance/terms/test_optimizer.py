"""The optimizer step (terms/optimizer.py): 30 B per local parameter at HBM speed, sharded by ZeRO >= 1."""

from __future__ import annotations

import pytest

from engine.performance.terms.optimizer import optimizer_step
from engine.performance.terms.parameters import gpu_params
from tests.engine.performance._build import build, dense_doc, hbm_by_hand, moe_doc


@pytest.mark.parametrize(("zero", "shards"), [(0, 1.0), (1, 8.0), (3, 8.0)])
def test_adam_touches_30_bytes_per_local_parameter(zero: int, shards: float) -> None:
    ctx, lay, shape = build(dense_doc(tp=8, zero=zero))
    p = float(gpu_params(ctx, lay, shape).total_params[0])
    opt = optimizer_step(ctx, lay, shape, gpu_params(ctx, lay, shape))
    assert opt.local_params[0] == pytest.approx(p / shards, rel=1e-12)
    assert opt.time_s[0] == pytest.approx(hbm_by_hand(ctx, p / shards * 30.0), rel=1e-12)


def test_expert_states_shard_over_the_expert_data_parallel_group_only() -> None:
    """d c = 64 ranks, EP 8: routed-expert states shard 64 / 8 = 8 ways, the rest 64 ways."""
    ctx, lay, shape = build(moe_doc(ep=8))
    params = gpu_params(ctx, lay, shape)
    p, e = float(params.total_params[0]), float(params.expert_params[0])
    assert optimizer_step(ctx, lay, shape, params).local_params[0] == pytest.approx((p - e) / 64 + e / 8, rel=1e-12)
