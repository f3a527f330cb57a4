"""Number formats of what a step keeps (docs/performance-model.md s.6): the fp8 activation cache of the FFN's inner
activations (training.activation_cache, DeepSeek-V3 Sec. 3.3.3) and bf16 Adam moments (training.optimizer_moments),
each against its bytes written out by hand."""

from __future__ import annotations

import pytest

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import predict
from engine.performance.frameworks import layout_profiles
from engine.performance.terms.kernels import hbm_time
from engine.performance.terms.layer import fp8_casts
from engine.performance.terms.memory import layer_activations, memory_per_gpu
from engine.performance.terms.optimizer import optimizer_step
from engine.performance.terms.parameters import gpu_params
from tests.engine.performance._build import build, dense_doc

F, TP = 11008, 8  # Llama-2-7B FFN width (SwiGLU: gate and up, 2 FFN-in outputs per token), tensor parallel 8
TOKENS = 4096.0  # micro-batch 1 x seq 4096
# one FFN-in output element: bf16 2 B -> fp8 1 B + one fp32 scale per 128 elements (4 / 128 B)
SAVED_PER_ELEM = 2.0 - 1.0 - 4.0 / 128.0
PASS_PER_ELEM = 2.0 + 1.0 + 4.0 / 128.0  # quantise: read bf16, write fp8 + scale (dequantise: the reverse)


def _pair(**training: object) -> tuple[object, object]:
    base = build(dense_doc(tp=TP, precision="fp8", **training))
    cached = build(dense_doc(tp=TP, precision="fp8", activation_cache="fp8", **training))
    return base, cached


def test_fp8_cache_saves_a_byte_less_a_scale_per_swiglu_input_element() -> None:
    """SwiGLU keeps gate and up outputs (2 f / t elements per token): fp8 saves 2 x 11008 / 8 x (1 - 1/32) B."""
    (c0, l0, s0), (c1, l1, s1) = _pair()
    saved = layer_activations(c0, l0, s0).kept_bytes[0] - layer_activations(c1, l1, s1).kept_bytes[0]
    assert saved == pytest.approx(2 * F / TP * SAVED_PER_ELEM, rel=1e-12)


def test_fp8_cache_moves_first_stage_memory_by_tokens_times_layers() -> None:
    (c0, l0, s0), (c1, l1, s1) = _pair()
    m0 = memory_per_gpu(c0, l0, s0, layout_profiles(c0.framework, l0.tp, l0.pp), gpu_params(c0, l0, s0))
    m1 = memory_per_gpu(c1, l1, s1, layout_profiles(c1.framework, l1.tp, l1.pp), gpu_params(c1, l1, s1))
    assert m0.activation_bytes[0] - m1.activation_bytes[0] == pytest.approx(
        TOKENS * 32 * 2 * F / TP * SAVED_PER_ELEM, rel=1e-9)  # 32 layers on the one stage
    assert m0.states_bytes[0] == m1.states_bytes[0]


def test_fp8_cache_costs_a_quantise_and_a_dequantise_pass() -> None:
    (c0, l0, s0), (c1, l1, s1) = _pair()
    f0, b0 = fp8_casts(c0, l0, s0)
    f1, b1 = fp8_casts(c1, l1, s1)
    one_pass = hbm_time(c1, TOKENS * PASS_PER_ELEM * 2 * F / TP)
    assert f1[0] - f0[0] == pytest.approx(float(one_pass), rel=1e-9)
    assert b1[0] - b0[0] == pytest.approx(float(one_pass), rel=1e-9)


def test_fp8_cache_needs_a_quantised_precision() -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(dense_doc(precision="bf16", activation_cache="fp8"))
    assert err.value.field == "training.activation_cache"


def test_bf16_moments_hold_8_bytes_of_adam_state_per_parameter() -> None:
    """fp32 master (4) + bf16 m, v (2 + 2) = 8 B instead of 12: ZeRO-1 over d = 8 saves params x 4 / 8."""
    c0, l0, s0 = build(dense_doc(tp=TP))
    c1, l1, s1 = build(dense_doc(tp=TP, optimizer_moments="bf16"))
    p0, p1 = gpu_params(c0, l0, s0), gpu_params(c1, l1, s1)
    m0 = memory_per_gpu(c0, l0, s0, layout_profiles(c0.framework, l0.tp, l0.pp), p0)
    m1 = memory_per_gpu(c1, l1, s1, layout_profiles(c1.framework, l1.tp, l1.pp), p1)
    assert m0.states_bytes[0] - m1.states_bytes[0] == pytest.approx(float(p0.total_params[0]) * 4.0 / 8.0, rel=1e-12)
    assert m0.activation_bytes[0] == m1.activation_bytes[0]


def test_bf16_moments_step_moves_22_not_30_bytes_per_parameter() -> None:
    c0, l0, s0 = build(dense_doc(tp=TP))
    c1, l1, s1 = build(dense_doc(tp=TP, optimizer_moments="bf16"))
    t0 = optimizer_step(c0, l0, s0, gpu_params(c0, l0, s0))
    t1 = optimizer_step(c1, l1, s1, gpu_params(c1, l1, s1))
    assert t1.local_params[0] == t0.local_params[0]
    assert t1.time_s[0] == pytest.approx(float(hbm_time(c1, t1.local_params[0] * 22.0)), rel=1e-12)
    assert t1.time_s[0] / t0.time_s[0] == pytest.approx(22.0 / 30.0, rel=1e-12)


def test_defaults_are_bf16_cache_and_fp32_moments() -> None:
    """The fields absent predict exactly what their explicit defaults do."""
    plain = predict(dense_doc(tp=TP, precision="fp8"))
    explicit = predict(dense_doc(tp=TP, precision="fp8", activation_cache="bf16", optimizer_moments="fp32"))
    assert plain.step_time_s == explicit.step_time_s and plain.memory_gb_per_gpu == explicit.memory_gb_per_gpu
