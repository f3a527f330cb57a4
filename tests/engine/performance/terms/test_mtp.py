"""Multi-token prediction (model.mtp_layers; terms/mtp.py): each module's FLOPs, its work, weights and memory on the
last pipeline rank, each against the module written out by hand (DeepSeek-V3 Sec. 2.2; Megatron-Core's MTP block)."""

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
from engine.performance.model import evaluate, step_terms
from engine.performance.terms.flops import flops_per_token
from engine.performance.terms.mtp import projection_tp_comm
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import GPT_22B, scenario
from tests.engine.performance._build import BW, LinearComm, build, dense_doc, gemm_by_hand, moe_doc

# GPT-22B: L 48, h 6144, 64 heads, FFN 4h (2 matrices), V 51200, s 2048
L, H, S, V = 48, 6144.0, 2048.0, 51200.0
GPT_LAYER_FLOPS = 24 * H * H + 4 * S * H  # QKV + output 8h^2, FFN 16h^2, attention core 4sh
MODULE_EXTRA_FLOPS = 2 * 2 * H * H + 2 * H * V  # the 2h x h projection and the output head again


def _with_mtp(doc: dict, depth: int) -> dict:
    out = copy.deepcopy(doc)
    out["model"]["mtp_layers"] = depth
    return out


@pytest.mark.parametrize("depth", [1, 2])
def test_each_module_adds_a_layer_a_projection_and_the_output_head(depth: int) -> None:
    ctx, _, _ = build(_with_mtp(dense_doc(model=GPT_22B, tp=8), depth))
    f = flops_per_token(ctx)
    assert f.mtp_flops == pytest.approx(depth * (GPT_LAYER_FLOPS + MODULE_EXTRA_FLOPS), rel=1e-12)
    assert f.forward_flops == pytest.approx(L * GPT_LAYER_FLOPS + 2 * H * V + f.mtp_flops, rel=1e-12)
    assert f.layers_flops == pytest.approx(L * GPT_LAYER_FLOPS, rel=1e-12)  # the main model's layers only


def test_an_moe_models_module_layer_is_an_moe_layer() -> None:
    """MOE_22B (16 experts of 4096, top-2, one shared, 4 dense layers): the module's layer runs 3 experts of 2
    matrices and the 16-way router, not the dense FFN (Megatron-LM counts MTP layers as the last layer's kind)."""
    ctx, _, _ = build(_with_mtp(moe_doc(), 1))
    moe_ffn = 2 * 2 * H * 4096 * (2 + 1) + 2 * H * 16
    expected = 8 * H * H + 4 * S * H + moe_ffn + MODULE_EXTRA_FLOPS
    assert flops_per_token(ctx).mtp_flops == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("recompute", "training", "reruns"), [
    ("none", {}, False),
    ("full", {}, True),  # Megatron-Core from 2025-08 (the current record): each module checkpointed
    ("full", {"framework": "megatron-core", "framework_release": "2025-07"}, False),  # its MTP block did not recompute
    ("full", {"recompute_layers": L}, False),  # the 'block' method (every one of the 48 layers) skips the modules
])
def test_model_flops_count_the_modules_three_times_and_full_recompute_reruns_them_as_the_stack_does(
        recompute: str, training: dict, reruns: bool) -> None:
    doc = dense_doc(model=GPT_22B, tp=8, recompute=recompute, gb=64, **training)
    base, mtp = (step_terms(*build(d)[:2]).flops for d in (doc, _with_mtp(doc, 1)))
    tokens = 64 * S
    assert mtp.model_flops[0] - base.model_flops[0] == pytest.approx(
        3 * (GPT_LAYER_FLOPS + MODULE_EXTRA_FLOPS) * tokens, rel=1e-9)
    rerun = (GPT_LAYER_FLOPS + 2 * 2 * H * H) * tokens if reruns else 0.0  # the layer and the projection, not the head
    assert (mtp.hardware_flops[0] - mtp.model_flops[0]) - (base.hardware_flops[0] - base.model_flops[0]) == \
        pytest.approx(rerun, rel=1e-9, abs=1.0)


@pytest.mark.parametrize(("release", "reruns"), [(None, True), ("2025-07", False)])
def test_a_rerun_module_recomputes_its_projection_and_layer_forward_and_gathers_again(release: str | None,
                                                                                      reruns: bool) -> None:
    """pp 1, tp 8, full recomputation: the module adds the projection's three GEMMs (four where it is rerun), the
    output layer and loss, and the layer with its recomputed forward only where it is rerun; the rerun's two forward
    all-gathers (half a pair and a pair) are exposed."""
    training = {"framework": "megatron-core", **({"framework_release": release} if release else {})}
    base_doc = dense_doc(model=GPT_22B, tp=8, gb=64, recompute="full", **training)
    base = step_terms(*build(base_doc)[:2])
    ctx, lay, _ = build(_with_mtp(base_doc, 1))
    mtp = step_terms(ctx, lay)
    gemm = gemm_by_hand(ctx, S, 2 * H, H / 8)
    layer = base.layer.total_s[0] - (0.0 if reruns else base.layer.recompute_s[0])
    assert base.layer.recompute_s[0] > 0.0
    added = (4 if reruns else 3) * gemm + base.logits.total_s[0] + layer
    assert mtp.stage.compute_s[0] - base.stage.compute_s[0] == pytest.approx(added, rel=1e-9)
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, release)
    comm = LinearComm()
    exposed, _ = projection_tp_comm(ctx, lay, build(_with_mtp(base_doc, 1))[2], prof, comm, np.array([np.inf]),
                                    1.0 if reruns else 0.0)
    assert exposed[0] == pytest.approx((2.0 + (1.5 if reruns else 0.0)) * PAIR, rel=1e-12)


def test_without_a_pipeline_the_stage_runs_the_modules_after_the_model() -> None:
    """pp 1: the one rank's compute grows by the projection (M x 2h) @ (2h x h/t) forward and backward (3 GEMMs),
    the output layer and loss again, and one mean layer (a dense model's module layer is one); its per-layer
    communication runs over L + 1 layers."""
    base_doc = dense_doc(model=GPT_22B, tp=8, gb=64)
    base = step_terms(*build(base_doc)[:2])
    ctx, lay, _ = build(_with_mtp(base_doc, 1))
    mtp = step_terms(ctx, lay)
    m_tok = 1 * S
    proj = 3 * gemm_by_hand(ctx, m_tok, 2 * H, H / 8)
    assert mtp.mtp.projection_s[0] == pytest.approx(proj, rel=1e-9)
    assert mtp.mtp.equivalent_layers == pytest.approx(1.0, rel=1e-12)
    added = proj + base.logits.total_s[0] + base.layer.total_s[0]
    assert mtp.stage.compute_s[0] - base.stage.compute_s[0] == pytest.approx(added, rel=1e-9)
    assert mtp.stage.per_microbatch(ctx, np.array([1.0]))[0] == pytest.approx(L + 1, rel=1e-12)


def test_the_last_rank_holds_the_modules_weights_and_the_embedding_copy() -> None:
    """Per GPU, tp 8: a GPT layer's 12 h^2 and the 2 h^2 projection over 8, and with a pipeline the embedding's copy
    V h / 8 (Megatron keeps it on the MTP stage, tied to the first stage's); without one the stage has it already."""
    for pp, copy_params in ((1, 0.0), (2, V * H / 8)):
        doc = dense_doc(model=GPT_22B, tp=8, pp=pp, gpus=64, gb=64)
        base = step_terms(*build(doc)[:2]).params
        mtp = step_terms(*build(_with_mtp(doc, 1))[:2]).params
        expected = (12 * H * H + 2 * H * H) / 8 + copy_params
        assert mtp.mtp_params[0] == pytest.approx(expected, rel=1e-12)
        assert mtp.total_params[0] - base.total_params[0] == pytest.approx(expected, rel=1e-12)


def test_an_moe_modules_routed_experts_shard_like_the_others() -> None:
    """MOE_22B, ep 8: the module's layer holds 16 / 8 routed experts of 2 x h x 4096 (its expert weights)."""
    ctx, lay, _ = build(_with_mtp(moe_doc(ep=8), 1))
    params = step_terms(ctx, lay).params
    assert params.mtp_expert_params[0] == pytest.approx(16 / 8 * 2 * H * 4096, rel=1e-12)


def test_the_last_ranks_memory_holds_the_modules_and_the_first_ranks_does_not() -> None:
    """pp 2, ZeRO 0, bf16: the last rank adds 18 B per module weight (bf16 weight 2, fp32 gradient 4, Adam 12) and,
    for its one micro-batch, a mean layer's activations, the normed inputs (4h bf16 over the 8 sequence-parallel
    ranks) and one more set of logits (bf16 + fp32 copy, 6 B per V/t element); the first rank does not change."""
    doc = dense_doc(model=GPT_22B, tp=8, pp=2, gpus=64, gb=64, zero=0)
    base = step_terms(*build(doc)[:2])
    ctx, lay, _ = build(_with_mtp(doc, 1))
    mtp = step_terms(ctx, lay)
    m_tok = S
    kept = (base.memory.last_stage_bytes[0] - base.memory.states_bytes[0] - base.memory.logits_bytes[0]) / (
        m_tok * 1.0)  # one micro-batch of the last rank's 24 layers (1F1B)
    per_layer = kept / 24
    expected = (18.0 * mtp.params.mtp_params[0] + m_tok * (per_layer + 2.0 * 4 * H / 8)
                + m_tok * V / 8 * 6.0)
    assert mtp.memory.last_stage_bytes[0] - base.memory.last_stage_bytes[0] == pytest.approx(expected, rel=1e-9)
    assert mtp.memory.activation_bytes[0] == base.memory.activation_bytes[0]
    first = base.memory.states_bytes[0] + base.memory.activation_bytes[0]  # ZeRO 0: no gather buffers
    assert mtp.memory.total_bytes[0] == pytest.approx(max(first, mtp.memory.last_stage_bytes[0]), rel=1e-12)


@pytest.mark.parametrize("doc", [dense_doc(model=GPT_22B, tp=1, pp=1, gpus=64, gb=128),
                                 moe_doc(tp=1, ep=8, pp=1, gb=128)], ids=["dense", "moe"])
def test_modules_never_make_a_layout_faster(doc: dict) -> None:
    """Every layout the search would try (degrees auto): the modules add work, so no step gets shorter."""
    auto = copy.deepcopy(doc)
    auto["parallelism"] = {"tp": "auto", "pp": "auto", "cp": 1, "ep": doc["parallelism"]["ep"], "vpp": "auto",
                           "sequence_parallel": "auto"}
    auto["training"].update(micro_batch="auto", recompute="auto")
    steps = []
    for d in (auto, _with_mtp(auto, 1)):
        s = parse_scenario(d)
        steps.append(evaluate(make_context(s, gpu_spec(s.cluster.gpu)), candidate_layouts(s)).step_time_s)
    assert len(steps[0]) > 20
    assert not np.any(steps[1] < steps[0] * (1 - 1e-12)), float((steps[1] / steps[0]).min())


def test_the_depth_is_bounded_and_written_only_when_set() -> None:
    for bad in (-1, 17, "two"):
        with pytest.raises(ScenarioError) as err:
            parse_scenario(_with_mtp(scenario(), bad))
        assert err.value.field == "model.mtp_layers"
    assert scenario_to_dict(parse_scenario(_with_mtp(scenario(), 1)))["model"]["mtp_layers"] == 1
    assert "mtp_layers" not in scenario_to_dict(parse_scenario(_with_mtp(scenario(), 0)))["model"]
    assert "mtp_layers" not in scenario_to_dict(parse_scenario(scenario()))["model"]


def test_an_moe_models_module_layer_counts_as_its_flops_in_mean_layers() -> None:
    """MOE_22B (48 layers, 4 of them dense with FFN 4h, 44 MoE with 3 active experts of 4096 and a 16-way router):
    the module's MoE layer is (attention + MoE FFN) / the mean layer's FLOPs: lighter than a mean layer here, whose
    4 dense FFNs (4h = 24,576 wide) outweigh 3 experts of 4,096."""
    from engine.performance.terms.mtp import mtp_equivalent_layers

    ctx, _, _ = build(_with_mtp(moe_doc(), 2))
    attention = 8 * H * H + 4 * S * H
    dense, moe = 2 * 2 * H * 4 * H, 2 * 2 * H * 4096 * 3 + 2 * H * 16
    mean = attention + (4 * dense + 44 * moe) / 48
    assert mtp_equivalent_layers(ctx) == pytest.approx(2 * (attention + moe) / mean, rel=1e-12)
    assert 1.9 < mtp_equivalent_layers(ctx) < 2.0


# the closed-form collective model (LinearComm): an all-gather or reduce-scatter moves its M x w bf16 buffer once over
# the bus, an all-reduce twice; PAIR is one all-reduce of the M x h activation (GPT-22B, s 2048, b 1)
PAIR = 2.0 * S * H * 2.0 / BW


def _projection(sp: bool, release: str | None = None, framework: str = "megatron-core", tp: int = 8,
                gemm_s: float = np.inf) -> tuple[float, float]:
    ctx, lay, shape = build(_with_mtp(dense_doc(model=GPT_22B, tp=tp, sp=sp, framework=framework), 1))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp, release)
    exposed, hidden = projection_tp_comm(ctx, lay, shape, prof, LinearComm(), np.array([gemm_s]))
    return float(exposed[0]), float(hidden[0])


@pytest.mark.parametrize(("sp", "release", "exposed_pairs", "hidden_pairs"), [
    # SP, asynchronous backward: forward the output's all-gather (M x h, half a pair) and eh_proj's input all-gather
    # (M x 2h, a pair), backward the output gradient's all-gather (half a pair) exposed; the input gradient's
    # reduce-scatter and the input's re-gather (M x 2h each, a pair each) under the backward GEMMs
    (True, None, 0.5 + 1.0 + 0.5, 1.0 + 1.0),
    # no SP: the output's all-gather exposed; the input gradient's all-reduce (M x 2h: two pairs) under the wgrad GEMM
    (False, None, 0.5, 2.0),
    # Megatron-LM of April 2021 (before its asynchronous backward): the same traffic all exposed
    (False, "2021-04", 0.5 + 2.0, 0.0),
])
def test_the_projection_gathers_its_input_and_output_as_megatron_does(sp: bool, release: str | None,
                                                                      exposed_pairs: float,
                                                                      hidden_pairs: float) -> None:
    exposed, hidden = _projection(sp, release)
    assert exposed == pytest.approx(exposed_pairs * PAIR, rel=1e-12)
    assert hidden == pytest.approx(hidden_pairs * PAIR, rel=1e-12)


def test_the_projections_backward_hides_no_more_than_its_gemms_last_and_userbuffers_their_share() -> None:
    """Backward GEMMs of a quarter pair each hide a quarter pair each (SP: 2 of the 4 pairs behind them, 0.5 hidden);
    NeMo's userbuffers (no asynchronous-backward path) hide 0.6 of eh_proj's own two pairs, never the module's own
    gathers (one pair); nothing at TP 1."""
    exposed, hidden = _projection(True, gemm_s=0.25 * PAIR)
    assert hidden == pytest.approx(0.5 * PAIR, rel=1e-12)
    assert exposed == pytest.approx((4.0 - 0.5) * PAIR, rel=1e-12)
    exposed, hidden = _projection(True, framework="nemo")
    assert hidden == pytest.approx(0.6 * 2.0 * PAIR, rel=1e-12)
    assert exposed == pytest.approx(1.0 * PAIR + 0.4 * 2.0 * PAIR, rel=1e-12)
    assert _projection(False, tp=1) == (0.0, 0.0)


def test_the_stage_charges_the_projections_tp_collectives_once_per_module() -> None:
    """pp 1, tp 8: the micro-batch's exposed TP time is L + 1 layers' (the module's layer) plus D projections'; what
    the backward hides of theirs interferes like the layers' hidden collectives."""
    doc = _with_mtp(dense_doc(model=GPT_22B, tp=8, gb=64, framework="megatron-core"), 2)
    ctx, lay, _ = build(doc)
    terms = step_terms(ctx, lay)
    assert terms.stage.tail_comm_s[0] == pytest.approx(terms.mtp.tp_exposed_s[0], rel=1e-12)
    expected = (L + 2) * terms.tensor_parallel.exposed_s[0] + terms.mtp.tp_exposed_s[0]
    assert terms.step.microbatch.tp_s[0] == pytest.approx(expected, rel=1e-12)
    base = step_terms(*build(_with_mtp(doc, 0))[:2])
    assert terms.mtp.tp_exposed_s[0] > 0.0 and base.mtp.tp_exposed_s[0] == 0.0
