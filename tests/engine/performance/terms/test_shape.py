"""What every term reads of a layout (terms/shape.py)."""

from __future__ import annotations

import pytest

from engine.performance.terms.shape import layout_shape
from tests.engine.performance._build import build, dense_doc, moe_doc


def test_tokens_microbatches_and_widths_per_rank() -> None:
    ctx, lay, _ = build(dense_doc(tp=8, cp=2, mb=2, gb=64, gpus=64))  # d = 4
    shape = layout_shape(ctx, lay)
    assert shape.microbatch_tokens[0] == 2 * 4096 / 2
    assert shape.microbatch_count[0] == 64 / (4 * 2)
    assert shape.sequence_shard_ranks[0] == 8
    assert shape.kv_local_elems[0] == 32 * 128 / 8
    assert shape.grad_reduce_ranks[0] == 8
    assert shape.stage_layers[0] == 32


def test_moe_share_and_expert_data_parallel_ranks() -> None:
    ctx, lay, _ = build(moe_doc(ep=8))
    shape = layout_shape(ctx, lay)
    assert shape.moe_layers == 44 and shape.moe_layer_fraction == pytest.approx(44 / 48)
    assert shape.expert_dp_ranks[0] == 64 / 8
