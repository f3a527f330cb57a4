"""Partial full recomputation (training.recompute_layers; Megatron-Core --recompute-method block
--recompute-num-layers n): the first n layers of each pipeline chunk checkpoint their input and recompute their
forward, the others keep every activation (docs/performance-model.md sections 2, 6). Closed forms by hand."""

from __future__ import annotations

import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import predict
from engine.performance.terms.attention import attention_core
from engine.performance.terms.ffn import dense_ffn, moe_ffn
from engine.performance.terms.layer import layer_compute
from engine.performance.terms.memory import layer_activations
from engine.performance.terms.shape import full_recompute_share
from tests.engine.performance._build import build, dense_doc


def _layer(doc: dict) -> tuple[object, object]:
    ctx, lay, shape = build(doc)
    attn = attention_core(ctx, lay, shape)
    return layer_compute(ctx, lay, shape, attn, dense_ffn(ctx, lay, shape), moe_ffn(ctx, lay, shape)), \
        layer_activations(ctx, lay, shape)


def test_share_is_n_of_a_chunk() -> None:
    """Llama-2-7B (32 layers), pp 2, vpp 2: chunks of ceil(32 / 4) = 8 layers; n = 3 -> 3/8; n above the chunk -> 1."""
    ctx, lay, _ = build(dense_doc(tp=8, pp=2, vpp=2, gb=64, recompute="full", recompute_layers=3))
    assert full_recompute_share(ctx, lay)[0] == pytest.approx(3.0 / 8.0)
    ctx, lay, _ = build(dense_doc(tp=8, pp=2, vpp=2, gb=64, recompute="full", recompute_layers=20))
    assert full_recompute_share(ctx, lay)[0] == pytest.approx(1.0)


def test_recompute_time_and_kept_bytes_mix_full_and_none_by_the_share() -> None:
    """n = 5 of 16 layers per stage (pp 2): recompute = 5/16 of the forward; kept bytes = 5/16 of full's (the layer
    input) + 11/16 of no recomputation's."""
    full, act_full = _layer(dense_doc(tp=8, pp=2, recompute="full"))
    _, act_none = _layer(dense_doc(tp=8, pp=2, recompute="none"))
    part, act_part = _layer(dense_doc(tp=8, pp=2, recompute="full", recompute_layers=5))
    share = 5.0 / 16.0
    assert part.recompute_s[0] == pytest.approx(share * full.forward_s[0], rel=1e-12)
    assert act_part.kept_bytes[0] == pytest.approx(share * act_full.kept_bytes[0] + (1 - share) * act_none.kept_bytes[0],
                                                   rel=1e-12)
    assert full.recompute_s[0] == pytest.approx(full.forward_s[0], rel=1e-12)


def test_hardware_flops_count_only_the_recomputed_layers() -> None:
    """HFU counts the recomputed forward: with 8 of 32 layers (pp 1), a quarter of full recomputation's extra FLOPs."""
    full = predict(dense_doc(tp=8, recompute="full"))
    none = predict(dense_doc(tp=8, recompute="none"))
    part = predict(dense_doc(tp=8, recompute="full", recompute_layers=8))
    per_step = lambda r: r.hardware_tflops_per_gpu * r.step_time_s  # noqa: E731 - hardware TFLOP per GPU per step
    assert per_step(part) - per_step(none) == pytest.approx(0.25 * (per_step(full) - per_step(none)), rel=1e-9)


def test_recompute_layers_needs_full_recomputation() -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(dense_doc(recompute="selective", recompute_layers=4))
    assert err.value.field == "training.recompute_layers"
    with pytest.raises(ScenarioError) as err:
        parse_scenario(dense_doc(recompute="full", recompute_layers=0))
    assert err.value.field == "training.recompute_layers"


def test_absent_is_every_layer() -> None:
    assert predict(dense_doc(tp=8, recompute="full")).step_time_s == predict(
        dense_doc(tp=8, recompute="full", recompute_layers=32)).step_time_s
