"""MoE parallel folding (``parallelism.etp``; Megatron-Core --expert-tensor-parallel-size, arXiv 2504.14960).

Attention runs t x c x d x p; the MoE layers run etp x e x edp x p over the same ranks. Without ``etp`` every
prediction is the one before the field existed (etp = t); with it the expert terms below follow closed forms
written out here by hand (docs/performance-model.md section 3, "MoE parallel folding").

The scenario: MOE_22B (GPT-22B shape, 48 layers of which the first 4 dense, h 6144, s 2048, plain GeLU FFN so 2
matrices per expert, 16 routed experts of width 4096, top-2, 1 shared expert) on 64 H100, b 1, c 1.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import candidate_layouts, predict, search
from engine.performance.context import make_context
from engine.performance.explain import explain
from engine.performance.frameworks import layout_profiles
from engine.performance.hardware import gpu_spec
from engine.performance.model import step_terms
from engine.performance.terms.data_parallel import data_parallel_sync
from engine.performance.terms.ffn import moe_ffn
from engine.performance.terms.groups import ParallelGroup, fabric_groups
from engine.performance.terms.memory import layer_activations
from engine.performance.terms.moe_balance import busiest_rank_factor
from engine.performance.terms.parameters import gpu_params
from engine.performance.terms.tensor_parallel import tensor_parallel_comm
from engine.schema.json_schema import json_schema
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import LLAMA_7B, scenario
from tests.engine.performance._build import BW, LinearComm, build, gemm_by_hand, moe_doc

H, SEQ, EXPERTS, TOP_K, EXPERT_FFN = 6144.0, 2048.0, 16.0, 2.0, 4096.0
MOE_LAYERS = 44.0  # 48 layers, the first 4 dense
EXPERT_PARAMS = 2.0 * H * EXPERT_FFN  # one expert: up and down projections


def folded(etp: int | str | None, *, tp: int = 4, ep: int = 8, gpus: int = 64, **kw: Any) -> dict[str, Any]:
    doc = moe_doc(tp=tp, ep=ep, gpus=gpus, **kw)
    if etp is not None:
        doc["parallelism"]["etp"] = etp
    return doc


# ------------------------------------------------------------------------------------------ (1) opt-in


@pytest.mark.parametrize("kw", [
    {}, {"dispatcher": "allgather"}, {"framework": "megatron-core", "pp": 2}, {"recompute": "full", "tp": 2},
])
def test_etp_equal_to_tp_is_the_prediction_without_etp_bit_for_bit(kw: dict[str, Any]) -> None:
    kw = dict(kw)
    tp = kw.pop("tp", 4)
    absent = predict(folded(None, tp=tp, **kw))
    same = predict(folded(tp, tp=tp, **kw))
    assert absent == same  # every field of the Result, floats compared exactly
    assert "etp" not in absent.parallelism


@pytest.mark.parametrize("placement", ["inner", "outer"])
def test_unfolded_layouts_keep_every_term_when_the_search_mixes_folded_ones(placement: str) -> None:
    """A search with etp = 2 holds layouts with tp = 2 (unfolded) next to folded ones: the unfolded rows' terms are
    those of the same layouts searched without etp (np.where never mixes a folded row's value into them)."""
    par = {"tp": "auto", "pp": 2, "cp": 1, "ep": 4, "vpp": 1, "dp_placement": placement}
    base = scenario(model=moe_doc()["model"], training={"global_batch": 64, "micro_batch": 1, "recompute": "none",
                                                        "zero": 1}, parallelism=par)
    with_etp = copy.deepcopy(base)
    with_etp["parallelism"]["etp"] = 2
    s0, s1 = parse_scenario(base), parse_scenario(with_etp)
    lay0, lay1 = candidate_layouts(s0), candidate_layouts(s1)
    assert not lay0.folded.any() and lay1.folded.any()
    ctx = make_context(s0, gpu_spec("H100-SXM"))
    t0, t1 = step_terms(ctx, lay0), step_terms(ctx, lay1)
    for i in np.flatnonzero(~lay1.folded):
        j = np.flatnonzero((lay0.tp == lay1.tp[i]) & (lay0.ep == lay1.ep[i]))
        assert len(j) == 1
        assert t1.step.step_s[i] == t0.step.step_s[j[0]]
        assert t1.memory.total_bytes[i] == t0.memory.total_bytes[j[0]]


def test_without_etp_the_search_enumerates_as_before() -> None:
    """No etp: ep divides dp * cp, etp = tp everywhere (nothing folded)."""
    doc = folded(None)
    doc["parallelism"].update({"tp": "auto", "ep": "auto"})
    lay = candidate_layouts(parse_scenario(doc))
    assert np.all(np.mod(lay.dp * lay.cp, lay.ep) == 0)
    assert np.array_equal(lay.expert_tp, lay.tp) and not lay.folded.any()


def test_the_canonical_document_writes_etp_only_when_set() -> None:
    assert "etp" not in scenario_to_dict(parse_scenario(folded(None)))["parallelism"]
    assert "etp" not in scenario_to_dict(parse_scenario(folded("auto")))["parallelism"]
    doc = scenario_to_dict(parse_scenario(folded(1)))
    assert doc["parallelism"]["etp"] == 1
    assert parse_scenario(doc).parallelism.etp == 1
    # every degree searched but etp: still written as an object, so etp survives the round trip
    degrees = dict.fromkeys(("tp", "pp", "cp", "ep", "vpp", "sequence_parallel"), "auto")
    searched = scenario(model=moe_doc()["model"], parallelism={**degrees, "etp": 2})
    assert scenario_to_dict(parse_scenario(searched))["parallelism"] == {**degrees, "etp": 2}


# --------------------------------------------------------------------------------------- (2) closed forms


def test_expert_parameters_per_gpu_divide_by_etp_times_ep() -> None:
    """etp 1, ep 8, tp 4: each GPU holds 16/8 whole experts of every MoE layer, total routed params / 8 (not / 32);
    the shared expert stays split over tp = 4."""
    ctx, lay, shape = build(folded(1))
    p = gpu_params(ctx, lay, shape)
    total_routed = MOE_LAYERS * EXPERTS * EXPERT_PARAMS
    assert p.expert_params[0] == pytest.approx(total_routed / 8.0, rel=1e-12)
    ctx0, lay0, shape0 = build(folded(None))
    assert gpu_params(ctx0, lay0, shape0).expert_params[0] == pytest.approx(total_routed / 32.0, rel=1e-12)
    # one MoE layer's parameters on a GPU, averaged with the dense layers: attention / 4 + (2 routed experts whole +
    # the shared one / 4) + the router (h x E, replicated); dense layers' FFN / 4
    attn = 4.0 * H * H / 4.0
    moe_layer = attn + 2.0 * EXPERT_PARAMS + EXPERT_PARAMS / 4.0 + H * EXPERTS
    dense_layer = attn + 2.0 * H * (4.0 * H) / 4.0  # GPT-22B dense FFN 24576 = 4h
    assert p.layer_params[0] == pytest.approx((4.0 * dense_layer + 44.0 * moe_layer) / 48.0, rel=1e-12)


def test_expert_tokens_and_gemms_follow_etp() -> None:
    """An expert-TP group of etp ranks holds etp / t of the attention TP group's routed copies: M e top_k / E x
    etp / t tokens per local expert (x the busiest-rank factor), GEMMs f_e / etp wide."""
    for etp, tokens in ((1, 2048.0 * 8 * 2 / 16 / 4), (2, 2048.0 * 8 * 2 / 16 / 2), (4, 2048.0 * 8 * 2 / 16)):
        ctx, lay, shape = build(folded(etp))
        moe = moe_ffn(ctx, lay, shape)
        imb = busiest_rank_factor(EXPERTS, np.asarray([8.0]), np.asarray([SEQ * TOP_K * etp / 4.0]))[0]
        assert moe.busiest_rank_factor[0] == pytest.approx(imb, rel=1e-12)
        assert moe.expert_tokens[0] == pytest.approx(tokens * imb, rel=1e-12)
        m = tokens * imb
        by_hand = (gemm_by_hand(ctx, m, H, EXPERT_FFN / etp, count=2.0, kernel_eff=ctx.expert_gemm_eff)
                   + gemm_by_hand(ctx, m, EXPERT_FFN / etp, H, count=2.0, kernel_eff=ctx.expert_gemm_eff))
        assert moe.routed_s[0] == pytest.approx(by_hand, rel=1e-9)
        # activations per token: etp / t of the tokens, each f_e / etp wide: the same k f_e (top_k + 1) / t
        assert moe.activation_elems[0] == pytest.approx(2.0 * EXPERT_FFN * 3.0 / 4.0, rel=1e-12)


def _tp(doc: dict[str, Any]) -> tuple[LinearComm, Any]:
    ctx, lay, shape = build(doc)
    comm = LinearComm()
    return comm, tensor_parallel_comm(ctx, lay, shape, layout_profiles(ctx.framework, lay.tp, lay.pp), comm)


def test_expert_tp_collective_vanishes_with_etp_1_and_runs_over_etp_otherwise() -> None:
    """Unfolded (tp 4): the FFN-side pair carries top_k + 1 shared copies of the M x h activation over tp. etp 1:
    no expert pair; the shared expert gets an ordinary TP pair (hideable). etp 2: top_k copies of etp / t = 1/2 of
    the tokens over the etp group."""
    act = SEQ * H * 2.0  # M x h x 2 B
    pair = 2.0 * act / BW  # all-reduce: the buffer twice over the bus
    _, unfolded = _tp(folded(None, framework="nemo"))
    assert unfolded.ffn_pair_s[0] == pytest.approx(3.0 * pair, rel=1e-12)
    assert unfolded.shared_pair_s[0] == 0.0
    _, one = _tp(folded(1, framework="nemo"))
    assert one.ffn_pair_s[0] == 0.0
    assert one.shared_pair_s[0] == pytest.approx(pair, rel=1e-12)
    f = MOE_LAYERS / 48.0
    hideable = 2.0 * (pair + (1.0 - f) * pair + f * pair)  # 4 collectives, half per side
    assert one.hideable_s[0] == pytest.approx(hideable, rel=1e-12)
    assert one.exposed_s[0] == pytest.approx(hideable * (1.0 - 0.6), rel=1e-12)  # NeMo hides 0.6
    comm, two = _tp(folded(2, framework="nemo"))
    assert two.ffn_pair_s[0] == pytest.approx(2.0 * (act * TOP_K / 2.0) / BW, rel=1e-12)
    assert ("etp", "ar", act * TOP_K / 2.0) in [(g, str(k), b) for g, k, b in comm.calls]


def test_allgather_dispatcher_gathers_over_etp_times_ep() -> None:
    """All-gather dispatcher, tp 4, etp 2, ep 4: one AG + RS of M e etp / t tokens over the etp e = 8 ranks."""
    comm, tp = _tp(folded(2, ep=4, dispatcher="allgather"))
    nbytes = SEQ * 4 * 2 / 4 * H * 2.0
    assert tp.dispatch_pair_s[0] == pytest.approx(2.0 * nbytes / BW, rel=1e-12)
    assert ("tp_ep", "ar", nbytes) in [(g, str(k), b) for g, k, b in comm.calls]
    ctx, lay, _ = build(folded(2, ep=4, dispatcher="allgather"))
    g = fabric_groups(ctx, lay)
    assert g.ranks[ParallelGroup.TP_EP][0] == 8 and g.strides[ParallelGroup.TP_EP][0] == 1


def test_expert_groups_are_strided_by_etp() -> None:
    """Expert rank order etp-ep-edp over the t c d = 64 ranks: EP (8 ranks) strided by etp, not tp; the expert-DP
    group t c d / (etp e) ranks strided by etp e; unfolded, EP strides by tp."""
    ctx, lay, _ = build(folded(None))
    assert fabric_groups(ctx, lay).strides[ParallelGroup.EP][0] == 4
    for etp in (1, 2):
        ctx, lay, _ = build(folded(etp))
        g = fabric_groups(ctx, lay)
        assert g.ranks[ParallelGroup.EP][0] == 8 and g.strides[ParallelGroup.EP][0] == etp
        assert g.ranks[ParallelGroup.ETP][0] == etp and g.strides[ParallelGroup.ETP][0] == 1
        assert g.ranks[ParallelGroup.EDP][0] == 64 / (etp * 8) and g.strides[ParallelGroup.EDP][0] == etp * 8
    # etp 1: the 8 EP ranks are one HGX node (8 adjacent GPUs); tp 4 stride: 8 ranks over 4 nodes
    ctx, lay, _ = build(folded(1))
    assert fabric_groups(ctx, lay).placements[ParallelGroup.EP].nodes[0] == 1.0
    ctx, lay, _ = build(folded(None))
    assert fabric_groups(ctx, lay).placements[ParallelGroup.EP].nodes[0] == 4.0


def test_outer_dp_placement_runs_ep_inside_each_tc_block() -> None:
    """DP outermost (TP, CP, PP, DP), tp 4, pp 2: a stage's ranks are blocks of t c = 4 adjacent GPUs, t c p = 8
    apart. EP 8 at etp 1 is 2 runs of 4 ranks, the runs 8 GPUs apart: 2 HGX nodes (4 ranks on each)."""
    doc = folded(1, pp=2)
    doc["parallelism"]["dp_placement"] = "outer"
    ctx, lay, _ = build(doc)
    g = fabric_groups(ctx, lay)
    assert g.strides[ParallelGroup.EP][0] == 8
    assert g.placements[ParallelGroup.EP].k[0] == 4.0 and g.placements[ParallelGroup.EP].nodes[0] == 2.0


def test_expert_states_and_gradients_use_the_expert_data_parallel_group() -> None:
    """edp = t c d / (etp e) = 64 / 8 = 8 (unfolded: d c / e = 16 / 8 = 2); the expert gradients reduce-scatter
    (ZeRO-1) over the EDP group, the rest over the d c shard group."""
    ctx, lay, shape = build(folded(1))
    assert shape.expert_dp_ranks[0] == 8.0 and shape.expert_shard_ranks[0] == 8.0
    _, _, shape0 = build(folded(None))
    assert shape0.expert_dp_ranks[0] == 2.0
    p = gpu_params(ctx, lay, shape)
    comm = LinearComm()
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    one = np.ones(1)
    dp = data_parallel_sync(lay, shape, prof, comm, p.total_params, one, one, expert_params=p.expert_params)
    calls = [(g, str(k), b) for g, k, b in comm.calls]
    dense = float(p.total_params[0] - p.expert_params[0])
    assert ("edp", "rs", pytest.approx(float(p.expert_params[0]) * 4.0, rel=1e-12)) in calls
    assert ("shard", "rs", pytest.approx(dense * 4.0, rel=1e-12)) in calls
    assert dp.grad_reduction_s[0] == pytest.approx((dense + float(p.expert_params[0])) * 4.0 / BW, rel=1e-12)


def test_folded_experts_reduce_even_without_data_parallelism() -> None:
    """tp 8, dp 1, etp 1, ep 2 on 8 GPUs: attention has no DP, but each expert is replicated over edp = 4 ranks,
    whose gradients still need reducing (unfolded the same layout has nothing to reduce)."""
    doc = folded(1, tp=8, ep=2, gpus=8, gb=8)
    ctx, lay, shape = build(doc)
    assert shape.grad_reduce_ranks[0] == 1.0 and shape.expert_dp_ranks[0] == 4.0
    terms = step_terms(ctx, lay)
    assert terms.data_parallel.exposed_s[0] + terms.data_parallel.hidden_s[0] > 0.0
    ctx0, lay0, _ = build(folded(None, tp=8, ep=1, gpus=8, gb=8))
    assert step_terms(ctx0, lay0).data_parallel.exposed_s[0] == 0.0


def test_dispatched_copies_in_memory_scale_by_etp_over_tp() -> None:
    """The routed copies a rank keeps (dispatch input 2 B + expert output 2 B, bf16, per copy per token, full width
    h) are etp / t of an unfolded rank's: at etp 1, tp 4 the activation difference is 3/4 of them."""
    ctx, lay, shape = build(folded(1))
    ctx0, lay0, shape0 = build(folded(None))
    diff = layer_activations(ctx0, lay0, shape0).stored_bytes[0] - layer_activations(ctx, lay, shape).stored_bytes[0]
    copies = MOE_LAYERS / 48.0 * (2.0 + 2.0) * TOP_K * H
    assert diff == pytest.approx(copies * (1.0 - 1.0 / 4.0), rel=1e-12)


# ------------------------------------------------------------------------------------------- (3) refusals


@pytest.mark.parametrize(("doc", "words"), [
    (folded(3), "expert_ffn_hidden"),
    (folded(8, ep=16), "tp*cp*dp=64"),
    (scenario(model=LLAMA_7B, parallelism={"tp": 4, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "etp": 1}),
     "mixture-of-experts"),
    (folded(0), "parallelism.etp"),
])
def test_bad_etp_is_refused_naming_the_field(doc: dict[str, Any], words: str) -> None:
    with pytest.raises(ScenarioError) as err:
        predict(doc)
    assert err.value.field == "parallelism.etp"
    assert words in str(err.value)


def test_a_search_no_layout_can_fold_is_refused_naming_etp() -> None:
    doc = folded(64, ep=16)
    doc["parallelism"]["tp"] = "auto"
    with pytest.raises(ScenarioError) as err:
        search(doc)
    assert err.value.field == "parallelism.etp"


# ------------------------------------------------------------------------------------------------- (4) API


def test_predict_and_search_with_etp_run_and_fit() -> None:
    """ep 16 over 64 GPUs with tp 8 leaves d c = 8, which 16 does not divide: only folding (etp 1) runs it."""
    doc = folded(1, tp=8, ep=16)
    r = predict(doc)
    assert r.fits and r.step_time_s is not None and r.step_time_s > 0
    assert r.parallelism["etp"] == 1 and r.parallelism["ep"] == 16 and r.parallelism["dp"] == 8
    assert explain(doc)["layout"] == r.parallelism
    with pytest.raises(ScenarioError) as err:
        predict(folded(None, tp=8, ep=16))
    assert err.value.field == "parallelism.ep"
    searched = folded(1, ep=16)
    searched["parallelism"].update({"tp": "auto", "pp": "auto"})
    best = search(searched)
    assert best.fits and best.parallelism["ep"] == 16
    assert best.parallelism.get("etp", best.parallelism["tp"]) == 1


def test_the_api_schema_declares_etp() -> None:
    prop = json_schema("parallelism")["properties"]["etp"]
    assert prop["description"].startswith("Expert tensor-parallel degree")
    assert {"type": "string", "enum": ["auto"]} in prop["oneOf"]
