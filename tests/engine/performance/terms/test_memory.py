"""Memory per GPU (terms/memory.py) against Korthikanti et al.'s activation counts, Megatron's interleaved warm-up
and the states / ZeRO-3 buffers written out by hand (docs/performance-model.md s.6)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from engine.performance.frameworks import layout_profiles
from engine.performance.hardware import gpu_spec
from engine.performance.terms.memory import (
    in_flight_layer_microbatches,
    layer_activations,
    memory_per_gpu,
    memory_uncertain,
    usable_memory_bytes,
)
from engine.performance.terms.parameters import gpu_params
from tests.engine._scenarios import GPT_22B
from tests.engine.performance._build import build, dense_doc

GPT = dict(copy.deepcopy(GPT_22B))  # h 6144, a 64 = g, f = 4h, GeLU: Korthikanti's GPT


@pytest.mark.parametrize(("recompute", "per_h"), [("none", 34.0), ("full", 2.0)])
def test_gpt_activations_are_korthikantis_34h_over_t_with_sequence_parallelism(recompute: str, per_h: float) -> None:
    """Korthikanti et al. 2022, Table 2, sequence parallelism: 34 s b h / t bytes per layer (no recompute; dropout
    masks counted), 2 s b h / t with full recomputation (the layer input only); flash attention stores no scores."""
    ctx, lay, shape = build(dense_doc(model=GPT, tp=8, recompute=recompute, dropout=True))
    act = layer_activations(ctx, lay, shape)
    assert act.kept_bytes[0] == pytest.approx(per_h * 6144 / 8, rel=1e-12)


def test_selective_recompute_drops_layernorm_and_activation_outputs() -> None:
    """Selective drops 4h/t (the two layernorm outputs) + 2f/t (the GeLU output) = 12h/t of Korthikanti's 34h/t."""
    ctx, lay, shape = build(dense_doc(model=GPT, tp=8, recompute="selective", dropout=True))
    act = layer_activations(ctx, lay, shape)
    assert act.selective_saved_bytes[0] == pytest.approx(12.0 * 6144 / 8, rel=1e-12)
    assert act.kept_bytes[0] == pytest.approx(22.0 * 6144 / 8, rel=1e-12)


def test_unfused_attention_keeps_5as_per_token_unless_recomputed() -> None:
    ctx, lay, shape = build(dense_doc(model=GPT, tp=8, recompute="none", dropout=True, attention="unfused"))
    act = layer_activations(ctx, lay, shape)
    assert act.score_bytes[0] == pytest.approx(5.0 * 64 * 2048 / 8, rel=1e-12)
    assert act.kept_bytes[0] == pytest.approx(34.0 * 6144 / 8 + 5.0 * 64 * 2048 / 8, rel=1e-12)


def test_first_stage_of_llama3_405b_holds_127_layer_microbatches() -> None:
    """TP8 PP16 v4 over 126 layers: chunk 0 holds 1 layer (the short first virtual stage), the others 2; Megatron's
    warm-up keeps 2p-1 = 31 micro-batches of chunk 0 and p = 16 of each other chunk: 31 + 3 x 16 x 2 = 127."""
    model = dict(GPT, layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248, gated_ffn=True)
    ctx, lay, shape = build(dense_doc(model=model, tp=8, pp=16, vpp=4, gpus=1024, gb=512))
    assert in_flight_layer_microbatches(ctx, lay, shape)[0] == pytest.approx(127.0, rel=1e-12)
    ctx, lay, shape = build(dense_doc(model=model, tp=8, pp=16, vpp=1, gpus=1024, gb=512))
    # 1F1B: p micro-batches of the first stage's layers, floor(126 / 16) = 7 (the short first stage)
    assert in_flight_layer_microbatches(ctx, lay, shape)[0] == pytest.approx(7.0 * 16, rel=1e-12)


def test_memory_is_states_plus_zero3_buffers_plus_activations() -> None:
    """ZeRO-3 over d = 8 (no pipelining): every state sharded (18 B / 8 per parameter) plus 3 unsharded layers of
    bf16 weights, plus the first stage's activations and logits."""
    ctx, lay, shape = build(dense_doc(zero=3, tp=8))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    params = gpu_params(ctx, lay, shape)
    mem = memory_per_gpu(ctx, lay, shape, prof, params)
    p_total, p_layer = float(params.total_params[0]), float(params.layer_params[0])
    assert mem.states_bytes[0] == pytest.approx(p_total * 18.0 / 8.0, rel=1e-12)
    assert mem.zero3_buffer_bytes[0] == pytest.approx(3.0 * p_layer * 2.0, rel=1e-12)
    tokens = 4096.0  # s b / c
    logits = tokens * 32000 / 8 * (2.0 + 4.0)  # bf16 logits + their fp32 softmax / gradient, V/t per rank
    assert mem.logits_bytes[0] == pytest.approx(logits, rel=1e-12)
    act = layer_activations(ctx, lay, shape)
    assert mem.activation_bytes[0] == pytest.approx(tokens * act.kept_bytes[0] * 32 + logits, rel=1e-12)
    assert mem.total_bytes[0] == pytest.approx(p_total * 18.0 / 8.0 + 3.0 * p_layer * 2.0
                                               + tokens * act.kept_bytes[0] * 32 + logits, rel=1e-12)


def test_usable_memory_is_binary_hbm_less_5_percent_and_1_gb() -> None:
    """An "80 GB" H100: 80 GiB x 0.9956 (driver reserve) x 0.95 (allocator) - 1 GB = 80.2 GB."""
    usable = usable_memory_bytes(gpu_spec("H100-SXM"))
    assert usable == pytest.approx(80 * 2**30 * 0.9956 * 0.95 - 1e9, rel=1e-12)
    assert np.isclose(usable / 1e9, 80.2, atol=0.05)


def test_memory_within_ten_percent_of_the_usable_hbm_is_uncertain() -> None:
    """|modelled - usable| <= 0.10 x usable: the note says whether it fits is not certain (either side)."""
    gpu = gpu_spec("H100-SXM")
    usable = usable_memory_bytes(gpu)
    got = memory_uncertain(np.array([0.89, 0.91, 1.0, 1.09, 1.11]) * usable, gpu)
    assert got.tolist() == [False, True, True, True, False]


def test_predict_says_memory_is_uncertain_near_the_limit() -> None:
    """Llama 3 405B at TP 8 PP 16 vpp 4 without the embedding and loss in the split: 75.4 GB modelled of 80.2
    usable (within 10%): fits, with the note. (Meta's own split, vpp 8 and the first chunk holding only the
    embedding, keeps 67.4 GB: outside the band, no note.)"""
    from engine.performance.api import predict
    from engine.validation.runs import DEFAULT_RUNS, load_runs

    run = next(r for r in load_runs(DEFAULT_RUNS) if r["id"] == "llama3-405b-8192-cp1")
    doc = copy.deepcopy(run["scenario"])
    doc["parallelism"].update(vpp=4, embedding_loss_in_split=False)
    r = predict(doc)
    assert r.fits and any(n.startswith("memory_uncertain:") for n in r.notes)
    assert not any(n.startswith("memory_uncertain:") for n in predict(run["scenario"]).notes)
    assert not any(n.startswith("memory_uncertain:") for n in predict(dense_doc(tp=8)).notes)  # 7B: far below
