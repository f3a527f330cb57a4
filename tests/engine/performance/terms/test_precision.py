"""Block-scaled precisions on Blackwell (issue #22 item 7): MXFP8 and NVFP4 GEMM rates, the NVFP4 recipe's bf16
share, quantisation casts as HBM traffic, the output layer in bf16, and the refusal on GPUs without the format.
Every expected value is written out by hand from docs/performance-model.md s.2 and the catalog's datasheet rates."""

from __future__ import annotations

import numpy as np
import pytest

from engine.cost.tco import tco
from engine.errors import ScenarioError
from engine.performance.api import predict
from engine.performance.hardware import gpu_spec
from engine.performance.terms.kernels import gemm_time
from engine.performance.terms.layer import fp8_casts, logits_compute
from tests.engine.performance._build import build, dense_doc, hbm_by_hand


def _roofline(ctx, peak: float, eta: float, in_bytes: float, m: float, k: float, n: float) -> float:
    rate = peak * eta
    flops = 2.0 * m * k * n
    intensity = flops / (in_bytes * (m * k + k * n) + 2.0 * m * n)
    return flops / rate * (1.0 + (rate / ctx.gpu.hbm_bw / intensity) ** 2) ** 0.5 + 3e-6


def _doc(gpu: str, precision: str) -> dict:
    doc = dense_doc(tp=8, precision=precision)
    doc["cluster"]["gpu"] = gpu
    return doc


def test_nvfp4_gemm_runs_84_percent_at_the_fp4_rate_and_16_percent_in_bf16_on_b300() -> None:
    """B300: NVFP4 13,500 TFLOP/s x 0.39, operands 0.5 + 1/16 B; the recipe's 10 of 62 blocks at bf16 2,250 x 0.52."""
    ctx, _, _ = build(_doc("B300", "nvfp4"))
    n = 8192.0
    fp4 = _roofline(ctx, 13500e12, 0.39, 0.5625, n, n, n)
    bf16 = _roofline(ctx, 2250e12, 0.52, 2.0, n, n, n)
    expected = (52.0 / 62.0) * fp4 + (10.0 / 62.0) * bf16
    assert gemm_time(ctx, np.array([n]), np.array([n]), np.array([n]))[0] == pytest.approx(expected, rel=1e-9)
    # forced bf16 (attention scores) ignores the recipe
    assert gemm_time(ctx, np.array([n]), np.array([n]), np.array([n]), bf16=True)[0] == pytest.approx(bf16, rel=1e-9)


def test_mxfp8_gemm_runs_every_linear_layer_at_the_fp8_rate_on_b200() -> None:
    """B200: MXFP8 4,500 TFLOP/s x gemm_eff_fp8 0.50, operands 1 + 1/32 B."""
    ctx, _, _ = build(_doc("B200", "mxfp8"))
    n = 4096.0
    expected = _roofline(ctx, 4500e12, 0.50, 1.03125, n, n, n)
    assert gemm_time(ctx, np.array([n]), np.array([n]), np.array([n]))[0] == pytest.approx(expected, rel=1e-9)


def test_quantisation_casts_are_hbm_traffic_per_format() -> None:
    """Forward casts: bytes per element x (ad + f)/t per token, + 2 launches. MXFP8 2 + 2(1 + 1/32) = 4.0625 B;
    NVFP4 (2 + 2(0.5 + 1/16) + 2 amax) = 5.125 B on the 52/62 quantised share; fp8 4 B."""
    for gpu, precision, per in (("B200", "mxfp8", 4.0625), ("B300", "nvfp4", 5.125 * 52.0 / 62.0),
                                ("B200", "fp8", 4.0)):
        ctx, lay, shape = build(_doc(gpu, precision))
        fwd, _ = fp8_casts(ctx, lay, shape)
        m_tok = float(shape.microbatch_tokens[0])
        expected = hbm_by_hand(ctx, m_tok * per * (4096.0 / 8 + 11008.0 / 8)) + 2 * 3e-6
        assert fwd[0] == pytest.approx(expected, rel=1e-9), precision


def test_output_layer_stays_bf16_in_block_scaled_recipes() -> None:
    ctx, lay, shape = build(_doc("B300", "nvfp4"))
    m_tok = float(shape.microbatch_tokens[0])
    expected = _roofline(ctx, 2250e12, 0.52, 2.0, m_tok, 4096.0, 32000.0 / 8)
    assert logits_compute(ctx, lay, shape).gemm_s[0] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("precision", ["nvfp4", "mxfp8"])
def test_a_gpu_without_the_format_is_refused_naming_training_precision(precision: str) -> None:
    with pytest.raises(ScenarioError) as err:
        predict(_doc("H100-SXM", precision))
    assert err.value.field == "training.precision"


def test_nvfp4_on_b300_end_to_end_predict_and_tco() -> None:
    """NVFP4 is faster than MXFP8 (same layout), by less than the 3x peak ratio (bf16 attention, casts, comms)."""
    nv = predict(_doc("B300", "nvfp4"))
    mx = predict(_doc("B300", "mxfp8"))
    assert nv.precision == "nvfp4" and nv.fits
    assert mx.step_time_s / 3.0 < nv.step_time_s < mx.step_time_s
    out = tco(_doc("B300", "nvfp4") | {"training": {**_doc("B300", "nvfp4")["training"], "tokens": 1e12}})
    assert out["tco"]["usd_per_gpu_hour"] > 0.0


@pytest.mark.parametrize(("gpu", "mxfp8", "nvfp4"), [("B200", 4500.0, 9000.0), ("B300", 4500.0, 13500.0),
                                                     ("GB200", 5000.0, 10000.0), ("GB300", 5000.0, 15000.0)])
def test_blackwell_datasheet_rates_per_precision(gpu: str, mxfp8: float, nvfp4: float) -> None:
    """Dense TFLOP/s per GPU from the HGX / NVL72 datasheet tables (FP4 'without sparsity'); H100 has neither."""
    spec = gpu_spec(gpu)
    assert spec.peak("mxfp8") == mxfp8 * 1e12 and spec.peak("nvfp4") == nvfp4 * 1e12
    assert spec.gemm_eff("nvfp4") == 0.39 and spec.gemm_eff("mxfp8") == spec.gemm_eff_fp8
    h100 = gpu_spec("H100-SXM")
    assert h100.peak_mxfp8_flops is None and h100.peak_nvfp4_flops is None
