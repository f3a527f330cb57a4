"""Multi-head latent attention (model.mla) against its matrices written out by hand from DeepSeek-V3's released
config (hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
v_head_dim 128): q_a_proj 7168 x 1536, q_b_proj 1536 x 128*192, kv_a_proj_with_mqa 7168 x (512 + 64),
kv_b_proj 512 x 128*(128 + 128), o_proj 128*128 x 7168."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import predict
from engine.performance.terms.attention import attention_core
from engine.performance.terms.flops import flops_per_token
from engine.performance.terms.layer import attention_gemms, selective_recompute
from engine.performance.terms.memory import layer_activations
from engine.performance.terms.parameters import gpu_params, params_per_layer
from engine.schema.types import scenario_to_dict
from tests.engine.performance._build import build, dense_doc, gemm_by_hand

H, HEADS, SEQ, LAYERS = 7168, 128, 4096, 4
MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
MODEL = {"name": "MLA-test", "layers": LAYERS, "hidden": H, "heads": HEADS, "ffn_hidden": 18432, "gated_ffn": True,
         "vocab": 129280, "seq_len": SEQ, "mla": MLA}
Q_A, Q_B = 7168 * 1536, 1536 * 128 * 192
KV_A, KV_B = 7168 * (512 + 64), 512 * 128 * (128 + 128)
O_PROJ = 128 * 128 * 7168
DOWN = Q_A + KV_A  # replicated on every TP rank (Megatron-Core's duplicated linear layers)
Q_ELEMS, K_ELEMS, V_ELEMS = 128 * 192, 128 * 192, 128 * 128  # per token


def _doc(tp: int = 8, **training: Any) -> dict[str, Any]:
    return dense_doc(tp=tp, model=copy.deepcopy(MODEL), **training)


def test_attention_parameters_are_deepseek_v3s_five_matrices() -> None:
    ctx, _lay, _shape = build(_doc())
    p = params_per_layer(ctx)
    assert p.attention_params == Q_A + Q_B + KV_A + KV_B + O_PROJ == 187_105_280
    assert p.attention_replicated_params == DOWN


def test_down_projections_are_whole_on_every_tp_rank() -> None:
    c8, l8, s8 = build(_doc(tp=8))
    c1, l1, s1 = build(_doc(tp=1, sp=False))
    ffn = params_per_layer(c8).dense_ffn_params
    assert gpu_params(c8, l8, s8).layer_params[0] == pytest.approx(DOWN + (Q_B + KV_B + O_PROJ + ffn) / 8, rel=1e-12)
    assert gpu_params(c1, l1, s1).layer_params[0] == pytest.approx(DOWN + Q_B + KV_B + O_PROJ + ffn, rel=1e-12)


def test_forward_flops_count_every_projection_and_a_192_wide_score_and_128_wide_value_core() -> None:
    ctx, _lay, _shape = build(_doc())
    f = flops_per_token(ctx)
    # non-causal convention: Q K^T is s x 128 x 192 MACs per token, A V s x 128 x 128; 2 FLOPs per MAC
    core = 2.0 * SEQ * (HEADS * 192 + HEADS * 128)
    assert f.attention_core_flops == pytest.approx(LAYERS * core, rel=1e-12)
    ffn = 2.0 * 3 * H * 18432
    assert f.layers_flops == pytest.approx(LAYERS * (2.0 * (Q_A + Q_B + KV_A + KV_B + O_PROJ) + core + ffn), rel=1e-12)


def test_projection_gemms_are_the_down_projection_whole_and_the_rest_by_head() -> None:
    ctx, lay, shape = build(_doc(tp=8))
    m = 1 * SEQ  # micro-batch 1
    by_hand = (gemm_by_hand(ctx, m, H, 1536 + 512 + 64) + gemm_by_hand(ctx, m, 1536, 128 * 192 / 8)
               + gemm_by_hand(ctx, m, 512, 128 * 256 / 8) + gemm_by_hand(ctx, m, 128 * 128 / 8, H))
    assert attention_gemms(ctx, lay, shape)[0] == pytest.approx(by_hand, rel=1e-9)


def test_fused_core_work_is_the_causal_half_of_both_gemms_at_their_widths() -> None:
    ctx, lay, shape = build(_doc(tp=8))
    gpu = ctx.gpu
    work = 2.0 * 2.0 * SEQ * (SEQ / 2) * (HEADS * (192 + 128) / 2) / 8  # 2 GEMMs x 2 FLOPs, s/2 keys, per rank
    rate = gpu.peak_bf16_flops * gpu.attn_eff * attention_core(ctx, lay, shape).block_rate_factor[0]
    launches = 2 * 3e-6  # one forward kernel pair per ring step (cp 1), 3 us each
    assert attention_core(ctx, lay, shape).fused_forward_s[0] == pytest.approx(work / rate + launches, rel=1e-6)


def test_recomputing_the_up_projections_drops_q_k_v_and_costs_their_gemms() -> None:
    base = ["layernorm", "activation"]
    c0, l0, s0 = build(_doc(tp=8, recompute="selective", recompute_modules=base))
    c1, l1, s1 = build(_doc(tp=8, recompute="selective", recompute_modules=[*base, "mla_up_proj"]))
    saved = layer_activations(c0, l0, s0).kept_bytes[0] - layer_activations(c1, l1, s1).kept_bytes[0]
    assert saved == pytest.approx(2.0 * (Q_ELEMS + K_ELEMS + V_ELEMS) / 8, rel=1e-12)  # bf16, split by head
    m = 1 * SEQ
    ups = gemm_by_hand(c1, m, 1536, 128 * 192 / 8) + gemm_by_hand(c1, m, 512, 128 * 256 / 8)
    attn = attention_core(c1, l1, s1)
    extra = selective_recompute(c1, l1, s1, attn, 0.0 * attn.forward_s, 0.0 * attn.forward_s)[0] \
        - selective_recompute(c0, l0, s0, attn, 0.0 * attn.forward_s, 0.0 * attn.forward_s)[0]
    assert extra == pytest.approx(ups, rel=1e-9)


def test_latents_are_kept_and_layernorm_recompute_drops_the_normalised_ones() -> None:
    """Kept per token (bf16, not split by TP, no SP at tp 1): the down outputs 1536 + 512 + 64 and the normalised
    latents 1536 + 512; recomputing the layernorms also drops the normalised latents."""
    c0, l0, s0 = build(_doc(tp=1, sp=False, recompute="selective", recompute_modules=["activation"]))
    c1, l1, s1 = build(_doc(tp=1, sp=False, recompute="selective", recompute_modules=["activation", "layernorm"]))
    a0, a1 = layer_activations(c0, l0, s0), layer_activations(c1, l1, s1)
    std = build(dense_doc(tp=1, sp=False, model={**{k: v for k, v in MODEL.items() if k != "mla"}},
                          recompute="selective", recompute_modules=["activation"]))
    # same model with standard 128 x 56 attention: the MLA row keeps the latents plus Q, K, V, O at their widths
    mla_attn = 2.0 * ((1536 + 512 + 64) + (1536 + 512)) + 2.0 * (Q_ELEMS + K_ELEMS + V_ELEMS + 128 * 128)
    std_attn = 2.0 * 4 * H  # Q, K, V and the output, each 7168 wide (128 heads of 56)
    assert a0.kept_bytes[0] - layer_activations(*std).kept_bytes[0] == pytest.approx(mla_attn - std_attn, rel=1e-12)
    layernorm_out = 2.0 * 2 * H  # the two layernorm outputs (QKV and FFN-in inputs)
    assert a0.kept_bytes[0] - a1.kept_bytes[0] == pytest.approx(layernorm_out + 2.0 * (1536 + 512), rel=1e-12)


def test_context_parallel_passes_the_mla_keys_and_values() -> None:
    _ctx, _lay, shape = build(_doc(tp=8))
    assert shape.kv_local_elems[0] == pytest.approx((K_ELEMS + V_ELEMS) / 2 / 8, rel=1e-12)


def test_mla_round_trips_through_the_canonical_document() -> None:
    s = parse_scenario(_doc())
    assert scenario_to_dict(s)["model"]["mla"] == {**MLA}
    assert parse_scenario(scenario_to_dict(s)).model.mla == s.model.mla


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["model"].update(head_dim=128), "model.head_dim"),
    (lambda d: d["model"].update(kv_heads=1), "model.kv_heads"),
    (lambda d: d["model"]["mla"].pop("kv_lora_rank"), "model.mla.kv_lora_rank"),
    (lambda d: d["model"]["mla"].update(v_head_dim=0), "model.mla.v_head_dim"),
    (lambda d: d["model"]["mla"].update(rank=4), "model.mla"),
])
def test_bad_mla_input_names_the_field(change: Any, field: str) -> None:
    doc = _doc()
    change(doc)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert err.value.field.startswith(field)


def test_up_projection_recompute_needs_mla() -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(dense_doc(recompute="selective", recompute_modules=["mla_up_proj"]))
    assert err.value.field == "training.recompute_modules"


def test_predict_runs_end_to_end() -> None:
    r = predict(_doc())
    assert r.fits and r.step_time_s is not None and 0 < r.mfu < 1
