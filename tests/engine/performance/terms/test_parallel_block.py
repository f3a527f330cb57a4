"""The parallel transformer block (model.parallel_block, terms/block.py) against its counts written out by hand:
z = x + Attn(LN(x)) + FFN(LN(x)) has one layernorm and one residual add where the serial block has two, keeps one
layernorm input and one shared GEMM input, and reduces its two branches' tensor-parallel outputs once
(GPT-NeoX gpt_j_residual). Each test fails if the parallel block's saving is halved or doubled."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import candidate_layouts
from engine.performance.context import make_context
from engine.performance.frameworks import layout_profiles
from engine.performance.hardware import gpu_spec
from engine.performance.model import evaluate
from engine.performance.terms.attention import attention_core
from engine.performance.terms.ffn import dense_ffn, moe_ffn
from engine.performance.terms.layer import fp8_casts, layer_compute
from engine.performance.terms.memory import layer_activations
from engine.performance.terms.tensor_parallel import tensor_parallel_comm
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import GPT_22B, LLAMA_7B, scenario
from tests.engine.performance._build import BW, MOE_22B, LinearComm, build, dense_doc, hbm_by_hand

M, H, F, T = 4096.0, 4096.0, 11008.0, 8.0  # Llama-2-7B, s 4096, b 1, TP 8 with SP
PAIR = 2.0 * M * H * 2.0 / BW  # all-reduce of the M x h bf16 activation in the closed-form collective model
LLAMA_PB = dict(copy.deepcopy(LLAMA_7B), parallel_block=True)
GPT = dict(copy.deepcopy(GPT_22B))  # h 6144, f = 4h, GeLU: Korthikanti's GPT
GPT_PB = dict(copy.deepcopy(GPT_22B), parallel_block=True)


def _tp(model, release: str | None, **kw):
    ctx, lay, shape = build(dense_doc(tp=8, model=model, framework="megatron-core", **kw))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, release)
    return tensor_parallel_comm(ctx, lay, shape, prof, LinearComm())


@pytest.mark.parametrize(("sp", "recompute", "serial", "parallel"), [
    (False, "none", 2.0, 1.0),  # two forward all-reduces -> one (the backward's two are hidden either way)
    (False, "full", 4.0, 2.0),  # and the recomputed forward's two -> one
    (True, "none", 3.0, 2.0),   # forward AG AG RS RS + backward AG AG -> forward AG AG RS + backward AG
    (True, "full", 5.0, 3.5),   # the recomputed forward's second reduce-scatter too
])
def test_one_output_reduction_per_pass_instead_of_two(sp: bool, recompute: str, serial: float,
                                                      parallel: float) -> None:
    """Megatron-Core (asynchronous backward: each branch's input-gradient reduction and SP re-gather hidden): the
    exposed pairs of the serial block and of the parallel block, in M x h all-reduces."""
    release = None if sp else "2021-10"
    one = _tp(LLAMA_7B, release, sp=sp, recompute=recompute)
    two = _tp(LLAMA_PB, release, sp=sp, recompute=recompute)
    assert one.exposed_s[0] == pytest.approx(serial * PAIR, rel=1e-12)
    assert two.exposed_s[0] == pytest.approx(parallel * PAIR, rel=1e-12)
    assert two.hidden_s[0] == pytest.approx(one.hidden_s[0], rel=1e-12)  # the input side is per branch still
    assert one.collectives_count[0] - two.collectives_count[0] == pytest.approx(serial - parallel)


def test_with_sequence_parallelism_the_backward_gathers_the_output_gradient_once() -> None:
    """SP: the reduce-scatter's backward is one all-gather of dy per stage: half a pair exposed in the backward of
    the parallel block against one pair (two halves) in the serial block's."""
    one = _tp(LLAMA_7B, None)
    two = _tp(LLAMA_PB, None)
    assert one.backward_exposed_s[0] == pytest.approx(1.0 * PAIR, rel=1e-12)
    assert two.backward_exposed_s[0] == pytest.approx(0.5 * PAIR, rel=1e-12)


def test_without_any_overlap_a_layer_makes_three_pairs_instead_of_four() -> None:
    """Megatron-LM of April 2021 (nothing hidden, no SP): forward one all-reduce, backward the two branches'
    input-gradient all-reduces."""
    one = _tp(LLAMA_7B, "2021-04", sp=False)
    two = _tp(LLAMA_PB, "2021-04", sp=False)
    assert one.exposed_s[0] == pytest.approx(4.0 * PAIR, rel=1e-12)
    assert two.exposed_s[0] == pytest.approx(3.0 * PAIR, rel=1e-12)


def test_one_layernorm_and_one_residual_add_of_elementwise_traffic() -> None:
    """Serial 12h/t (2 layernorms 4h, 2 residual adds 8h) + 3f/t and 6 launches; parallel 8h/t (1 layernorm 2h, 1
    add: read x and both branches, write, 2 masks: 6h) + 3f/t and 4 launches."""
    for model, per_h, kernels in ((LLAMA_7B, 12.0, 6.0), (LLAMA_PB, 8.0, 4.0)):
        ctx, lay, shape = build(dense_doc(tp=8, model=model))
        ffn = dense_ffn(ctx, lay, shape)
        assert ffn.replicated_elems[0] == pytest.approx(per_h * H / T, rel=1e-12)
        by_hand = hbm_by_hand(ctx, M * 2 * (per_h * H / T + 3 * F / T)) + kernels * 3e-6
        assert ffn.elementwise_s[0] == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize(("model", "per_h", "selective_per_h"), [(GPT, 34.0, 12.0), (GPT_PB, 30.0, 10.0)])
def test_activations_keep_one_layernorm_input_and_one_shared_gemm_input(model, per_h: float,
                                                                        selective_per_h: float) -> None:
    """Korthikanti et al.'s 34 s b h / t (SP, dropout) less one layernorm input (2h) and the FFN-in GEMM's own copy
    of its input (2h, it is the QKV GEMM's): 30h/t. Selective recomputation drops one layernorm output (2h) and the
    GeLU output (8h) instead of 4h + 8h."""
    ctx, lay, shape = build(dense_doc(model=model, tp=8, dropout=True))
    assert layer_activations(ctx, lay, shape).kept_bytes[0] == pytest.approx(per_h * 6144 / 8, rel=1e-12)
    ctx, lay, shape = build(dense_doc(model=model, tp=8, recompute="selective", dropout=True))
    act = layer_activations(ctx, lay, shape)
    assert act.selective_saved_bytes[0] == pytest.approx(selective_per_h * 6144 / 8, rel=1e-12)


def test_fp8_keeps_one_quantised_copy_of_the_shared_input() -> None:
    """fp8: the serial block keeps the QKV and FFN-in inputs in 1 B (8h - 2h of layernorm tensors), the parallel
    block its one layernorm input in bf16 and its one shared GEMM input in 1 B (4h - 1h): 3h/t per token fewer."""
    stored = []
    for model in (GPT, GPT_PB):
        ctx, lay, shape = build(dense_doc(model=model, tp=8, dropout=True, precision="fp8"))
        stored.append(layer_activations(ctx, lay, shape).stored_bytes[0])
    assert stored[0] - stored[1] == pytest.approx(3.0 * 6144 / 8, rel=1e-12)


def test_fp8_backward_casts_one_h_wide_output_gradient() -> None:
    """Both branches' outputs get the same gradient: the parallel block casts h/t per token once (4 B per element)
    and makes one cast launch fewer than the serial block's two."""
    casts = []
    for model in (LLAMA_7B, LLAMA_PB):
        ctx, lay, shape = build(dense_doc(tp=8, model=model, precision="fp8"))
        casts.append(fp8_casts(ctx, lay, shape))
    assert casts[0][0][0] == pytest.approx(casts[1][0][0], rel=1e-12)  # forward unchanged
    assert casts[0][1][0] - casts[1][1][0] == pytest.approx(hbm_by_hand(ctx, M * 4 * H / T) + 3e-6, rel=1e-9)


def test_selective_layernorm_recompute_redoes_one_layernorm() -> None:
    """training.recompute_modules layernorm: 2h/t elements and one launch fewer than the serial block's 4h/t and
    two."""
    sel = []
    for model in (LLAMA_7B, LLAMA_PB):
        ctx, lay, shape = build(dense_doc(tp=8, model=model, recompute="selective", recompute_modules=["layernorm"]))
        attn, dense = attention_core(ctx, lay, shape), dense_ffn(ctx, lay, shape)
        sel.append(layer_compute(ctx, lay, shape, attn, dense, moe_ffn(ctx, lay, shape)).selective_recompute_s[0])
    assert sel[0] == pytest.approx(hbm_by_hand(ctx, M * 2 * 4 * H / T) + 6e-6, rel=1e-9)
    assert sel[1] == pytest.approx(hbm_by_hand(ctx, M * 2 * 2 * H / T) + 3e-6, rel=1e-9)


def test_the_field_is_written_only_when_set_and_refused_with_experts() -> None:
    doc = dense_doc(model=LLAMA_PB)
    assert scenario_to_dict(parse_scenario(doc))["model"]["parallel_block"] is True
    assert "parallel_block" not in scenario_to_dict(parse_scenario(dense_doc()))["model"]
    assert "parallel_block" not in scenario_to_dict(parse_scenario(dense_doc(model=dict(LLAMA_7B,
                                                                                         parallel_block=False))))["model"]
    moe = dict(copy.deepcopy(MOE_22B), parallel_block=True)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(dense_doc(model=moe))
    assert err.value.field == "model.parallel_block"
    with pytest.raises(ScenarioError) as err:
        parse_scenario(dense_doc(model=dict(LLAMA_7B, parallel_block="yes")))
    assert err.value.field == "model.parallel_block"


@pytest.mark.parametrize("model", [LLAMA_7B, GPT_22B])
def test_over_every_layout_the_parallel_block_is_never_slower_and_saves_where_tp_runs(model) -> None:
    """Property over every layout the search considers (256 H100, everything auto): the parallel block only takes
    work away, so no layout is slower, and every layout with TP > 1 is faster (one exposed pair a layer fewer)."""
    auto = {"tp": "auto", "pp": "auto", "cp": "auto", "ep": "auto", "vpp": "auto", "sequence_parallel": "auto"}
    steps = []
    for m in (model, dict(model, parallel_block=True)):
        doc = scenario(parallelism=dict(auto), training={"micro_batch": "auto", "recompute": "auto", "zero": "auto",
                                                         "global_batch": 256}, cluster={"gpus": 256})
        doc["model"] = dict(m)
        s = parse_scenario(doc)
        lay = candidate_layouts(s)
        steps.append(evaluate(make_context(s, gpu_spec(s.cluster.gpu)), lay).step_time_s)
    serial, parallel = steps
    assert np.all(parallel <= serial * (1 + 1e-12))
    tp = lay.tp > 1
    assert tp.sum() > 10
    assert np.all(parallel[tp] < serial[tp])
