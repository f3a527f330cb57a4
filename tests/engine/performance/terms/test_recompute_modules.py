"""Selective recomputation of named modules (training.recompute_modules, issue #22 item 7): what each module drops
from memory and what it costs in time, against Korthikanti et al.'s activation counts and the layer's own GEMMs."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import NOT_A_CHOICE, ScenarioError
from engine.performance.api import predict
from engine.performance.terms.attention import attention_core
from engine.performance.terms.ffn import dense_ffn, moe_ffn
from engine.performance.terms.layer import attention_gemms, layer_compute
from engine.performance.terms.memory import layer_activations
from tests.engine._scenarios import GPT_22B, LLAMA_7B, scenario
from tests.engine.performance._build import build, dense_doc

GPT = dict(copy.deepcopy(GPT_22B))  # h 6144, f = 4h, GeLU, a 64


def _act(modules: list[str] | None, **kw: object):
    training = {"dropout": True} | ({"recompute_modules": modules} if modules else {})
    ctx, lay, shape = build(dense_doc(model=GPT, tp=8, recompute="selective", **training, **kw))
    return layer_activations(ctx, lay, shape)


@pytest.mark.parametrize(("modules", "saved_per_h"), [
    (None, 12.0),  # default: layernorm outputs 4h + GeLU output 2f (= 8h with f = 4h)
    (["layernorm"], 4.0),  # the two layernorm outputs, 2 x 2h
    (["activation"], 8.0),  # the GeLU output, 2f = 8h
    (["mlp"], 16.0),  # everything inside the FFN: FFN-in output + GeLU output, 4f = 16h
    (["layernorm", "mlp"], 20.0),
    (["core_attn"], 0.0),  # flash attention stores no scores: nothing to drop
])
def test_each_module_drops_its_activations(modules: list[str] | None, saved_per_h: float) -> None:
    """Bytes per token per layer over t = 8 (sequence parallelism divides the layernorm part by t as well)."""
    act = _act(modules)
    assert act.selective_saved_bytes[0] == pytest.approx(saved_per_h * 6144 / 8, rel=1e-12)
    assert act.kept_bytes[0] == pytest.approx((34.0 - saved_per_h) * 6144 / 8, rel=1e-12)


def test_core_attn_drops_unfused_scores_only_when_named() -> None:
    """Unfused attention keeps 5 a s / t bytes of scores per token; selective without core_attn keeps them."""
    with_core = _act(["layernorm", "core_attn"], attention="unfused")
    without = _act(["layernorm"], attention="unfused")
    scores = 5.0 * 64 * 2048 / 8  # a = 64 heads, s = 2048 (GPT_22B), t = 8
    assert without.kept_bytes[0] - with_core.kept_bytes[0] == pytest.approx(scores, rel=1e-12)


def test_mlp_recomputes_the_ffn_gemms() -> None:
    """mlp costs what activation costs plus the FFN's forward GEMMs (the layer's forward GEMMs less QKV and the
    output projection)."""
    def sel(modules: list[str]) -> tuple[float, float]:
        ctx, lay, shape = build(dense_doc(model=LLAMA_7B, tp=8, recompute="selective", recompute_modules=modules))
        attn, dense, moe = attention_core(ctx, lay, shape), dense_ffn(ctx, lay, shape), moe_ffn(ctx, lay, shape)
        layer = layer_compute(ctx, lay, shape, attn, dense, moe)
        return float(layer.selective_recompute_s[0]), float(layer.gemm_forward_s[0]
                                                             - attention_gemms(ctx, lay, shape)[0])
    mlp, ffn_gemms = sel(["mlp"])
    act, _ = sel(["activation"])
    assert mlp - act == pytest.approx(ffn_gemms, rel=1e-9)
    assert ffn_gemms > 0


def test_modules_apply_only_to_selective_and_trade_memory_for_time() -> None:
    def run(modules: list[str] | None) -> object:
        training = {"global_batch": 64, "micro_batch": 2, "zero": 1, "recompute": "selective"}
        if modules:
            training["recompute_modules"] = modules
        return predict(scenario(model=LLAMA_7B, training=training,
                                parallelism={"tp": 2, "pp": 1, "cp": 1, "ep": 1, "vpp": 1}, cluster={"gpus": 16}))
    default, mlp = run(None), run(["layernorm", "mlp"])
    assert mlp.memory_gb_per_gpu < default.memory_gb_per_gpu
    assert mlp.step_time_s > default.step_time_s
    assert np.isclose(run(["layernorm", "activation", "core_attn"]).step_time_s, default.step_time_s)


def test_bad_modules_are_refused_naming_the_item() -> None:
    doc = scenario(training={"recompute": "selective", "recompute_modules": ["layernorm", "dropout"]})
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    assert err.value.field == "training.recompute_modules.1" and err.value.code == NOT_A_CHOICE
