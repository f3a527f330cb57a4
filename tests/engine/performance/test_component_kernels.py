"""The kernel models against the component measurements (issue #22 item 1: "a test that the collective and kernel
models reproduce them, within a stated tolerance"). The collective half is collectives/test_component_curves.py.

GEMM (engine/performance/data/components/gemm.json). ``kernels.gemm_time`` is the smooth roofline
t = 2MKN / (P eta) sqrt(1 + (R/I)^2) + t_kernel. In a training step eta is the family's sustained constant
(hardware.FAMILY_CONSTANTS, still set from training rows: docs/validation.md); here eta is the best-shape fraction the
benchmark itself measured on the same GPU (ml-engineering MAMF, gemm-0004: H100 794.5 of 989 TFLOP/s), so what is
checked is the *shape* model against XLA's by-shape H100 table (46 bf16 shapes, 256..4096 per dimension). Per-row
error of the roofline, predicted / measured - 1, at 2026-11:

  asserted within +-12%, every shape whose output fills at least one wave of 128 x 128 tiles on 132 SMs
  (M x N >= 132 x 128^2, every dimension >= 1024): 2048^3 +5%, 2048x4096x2048 0%, 1024x4096x2048 +3%,
  4096x4096x1024 +4%, 4096^3 -2%.
  reported, not asserted: outputs below one wave (1024 x 1024: +20..+33%; M or N 256-512: +30..+110%) and k <= 512
  - the roofline has no wave quantisation or split-K, so sub-wave GEMMs are predicted too fast. Training GEMMs
  (M = micro-batch tokens >= 2,048, N and K >= hidden / TP) fill many waves; the model's weak region is
  decode-size or tiny-hidden GEMMs, which the engine does not plan.

Fused attention (attention.json). ``attention.fused_attention_forward`` runs the causal half of the counted FLOPs
at the kernel class's fraction of bf16 peak x short_block_rate(L): attn_eff (FlashAttention-2 class,
training.attention "flash") or attn_eff_native (cuDNN / FlashAttention-3 / -4, "native"). Hopper's attn_eff (0.35)
is FlashAttention-2's rate on H100; the PyTorch-SDPA FlashAttention-2 forward rows (attn-0452..0464, non-causal,
1K-16K) are 287-304 TFLOP/s: asserted within 25% (engine 294 at 1K, 346 from 2K: -2% .. +20%; the constant came
from the FlashAttention-3 paper's figure for native FA2, about 335, and PyTorch's SDPA build of FA2 runs a little
slower). The classes with forward and backward rows (causal, head dim 128) are checked on one step's work, forward
plus the 2.5x backward at one rate as the model runs them: measured 3.5 / (1/fwd + 2.5/bwd) against the engine's
rate. The native class, at 0.57 (Hopper) or 0.48 (Blackwell) of peak at 8K tokens on the curve L / (L + L_h)
(terms/attention.native_block_rate), asserted within 15% from 2K to 32K: cuDNN on H200 (2K +2%, 4K -1%, 8K -1%,
16K 0%, 32K +3%), FlashAttention-3 on H100 (2K +12%, 4K +1%, 8K -2%), cuDNN (cudnn-frontend) on B200 (2K +4%, 4K -3%,
8K 0%, 16K -1%, 32K +4%). Blackwell flash 0.15 on FlashAttention-2's curve (flat from 2K) against FlashAttention-2
2.7.4 on B200, asserted within 25% from 4K to 32K (4K +16%, 8K 0%, 16K -6%, 32K -8%). Reported, not asserted: B200
FlashAttention-2 at 2K and below (+59% .. +192%: FlashAttention-2's curve is Hopper's, flat from 2K), the native
class at 64K-128K on B200 (+4%, +15%) and at 512-1K (+15%, -1%), FlashAttention-3 at 1K (+38%).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.performance.context import Context, make_context
from engine.performance.hardware import gpu_spec
from engine.performance.terms.attention import native_block_rate, short_block_rate
from engine.performance.terms.kernels import gemm_time
from tests.engine._scenarios import scenario

COMPONENTS = Path(__file__).resolve().parents[3] / "engine/performance/data/components"
H100_SMS = 132  # NVIDIA H100 SXM5 whitepaper
TILE = 128 * 128  # a 128 x 128 output tile per CTA (cuBLAS's common Hopper tile edge)
GEMM_TOL = 0.12
ATTN_TOL = 0.25
NATIVE_TOL = 0.15


def _rows(name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((COMPONENTS / name).read_text())["rows"]
    return rows


def _h100(**gpu_changes: float) -> Context:
    s = parse_scenario(scenario(cluster={"gpu": "H100-SXM"}))
    ctx = make_context(s, gpu_spec(s.cluster.gpu))
    return dataclasses.replace(ctx, gpu=dataclasses.replace(ctx.gpu, **gpu_changes))


def _best_shape(gpu: str, precision: str) -> dict[str, Any]:
    return next(r for r in _rows("gemm.json") if r["gpu"] == gpu and r["precision"] == precision
                and r["kind"] == "best_shape_search")


def _fills_a_wave(r: dict[str, Any]) -> bool:
    return min(r["m"], r["n"], r["k"]) >= 1024 and r["m"] * r["n"] >= H100_SMS * TILE


XLA = [r for r in _rows("gemm.json") if r["source"] == "xla-matmul-perf-table" and r["precision"] == "bf16"]


def _roofline_tflops(ctx: Context, r: dict[str, Any]) -> float:
    t = float(gemm_time(ctx, np.float64(r["m"]), np.float64(r["k"]), np.float64(r["n"])))
    return 2.0 * r["m"] * r["n"] * r["k"] / t / 1e12


def test_h100_best_shape_ceiling_is_below_the_datasheet() -> None:
    row = _best_shape("H100", "bf16")
    assert row["spec_peak_tflops"] == pytest.approx(989.0)
    assert 0.75 < row["tflops"] / row["spec_peak_tflops"] < 0.85  # MAMF: 794.5 of 989


def test_selection_has_the_training_sized_shapes() -> None:
    asserted = [r for r in XLA if _fills_a_wave(r)]
    assert len(asserted) >= 5
    assert any(r["m"] == r["n"] == r["k"] == 4096 for r in asserted)


@pytest.mark.parametrize("row", [r for r in XLA if _fills_a_wave(r)], ids=lambda r: f"{r['m']}x{r['n']}x{r['k']}")
def test_gemm_roofline_reproduces_the_h100_shape_table(row: dict[str, Any]) -> None:
    best = _best_shape("H100", "bf16")
    ctx = _h100(gemm_eff_bf16=best["tflops"] / best["spec_peak_tflops"])
    predicted = _roofline_tflops(ctx, row)
    assert abs(predicted / row["tflops"] - 1.0) <= GEMM_TOL, f"predicted {predicted:.0f}, measured {row['tflops']}"


def test_gemm_roofline_is_too_fast_below_one_wave() -> None:
    """The known defect, pinned so that a wave-quantisation term shows up here: a 1024 x 1024 output is 64 tiles
    on 132 SMs, and the roofline (no quantisation) predicts it faster than measured."""
    best = _best_shape("H100", "bf16")
    ctx = _h100(gemm_eff_bf16=best["tflops"] / best["spec_peak_tflops"])
    row = next(r for r in XLA if (r["m"], r["n"], r["k"]) == (1024, 1024, 2048))
    assert _roofline_tflops(ctx, row) > 1.15 * row["tflops"]


def test_gemm_roofline_is_bandwidth_bound_for_thin_shapes() -> None:
    """Closed form: at M = N = 256, K = 4096 the arithmetic intensity 2MNK / 2(MK + KN + MN) = 241 FLOP/B is near
    the H100 ridge (P eta / HBM = 794.5e12 / 3.35e12 = 237), so the rate is about 1/sqrt(2) of P eta."""
    best = _best_shape("H100", "bf16")
    ctx = _h100(gemm_eff_bf16=best["tflops"] / best["spec_peak_tflops"], hbm_bw=3.35e12)
    m = n = 256.0
    k = 4096.0
    intensity = 2 * m * n * k / (2 * (m * k + k * n + m * n))
    ridge = best["tflops"] * 1e12 / 3.35e12
    t_compute = 2 * m * n * k / (best["tflops"] * 1e12) * math.sqrt(1 + (ridge / intensity) ** 2)
    expected = t_compute + 3e-6  # plus one kernel overhead (hardware.KERNEL_OVERHEAD_S, 2-4 us)
    assert float(gemm_time(ctx, np.float64(m), np.float64(k), np.float64(n))) == pytest.approx(expected, rel=1e-6)


FA2_H100 = [r for r in _rows("attention.json") if r["gpu"] == "H100" and r["source"] == "pytorch-benchmark-2296"
            and r["implementation"].startswith("FlashAttention-2") and r["pass"] == "fwd"]


@pytest.mark.parametrize("row", FA2_H100, ids=lambda r: f"seq{r['seqlen_q']}")
def test_hopper_flash_rate_is_flashattention2_on_h100(row: dict[str, Any]) -> None:
    ctx = _h100()
    rate = ctx.gpu.peak_bf16_flops * ctx.gpu.attn_eff * float(short_block_rate(np.float64(row["seqlen_kv"]
                                                                                          or row["seqlen_q"])))
    assert abs(rate / 1e12 / row["tflops"] - 1.0) <= ATTN_TOL, f"engine {rate / 1e12:.0f}, measured {row['tflops']}"


def test_fa2_rows_are_selected() -> None:
    assert len(FA2_H100) >= 4
    assert all(not r["causal"] and r["head_dim_qk"] == 128 for r in FA2_H100)


def test_short_blocks_are_slower_as_flashattention_measures() -> None:
    """Triton FA2 forward on H100 (attn-0440..0450, same FLOPs per row): 512-token rows run at 329 vs 434 TFLOP/s
    at 2,048 (0.76); the engine's short_block_rate(512) must be below 1 and within 25% of that ratio."""
    rows = {r["seqlen_q"]: r["tflops"] for r in _rows("attention.json") if r["source"] == "pytorch-benchmark-2391"
            and r["implementation"].startswith("Triton")}
    measured = rows[512] / rows[2048]
    engine = float(short_block_rate(np.float64(512)))
    assert engine < 1.0
    assert abs(engine / measured - 1.0) <= ATTN_TOL


# (gpu, catalog key, implementation, source, kernel class, shortest length asserted, tolerance): rows with forward
# and backward at each length
CLASS_ROWS = (
    ("H200", "H200", "cudnn (cudnn-frontend SDPA)", "cudnn-frontend-sdpa-results", "native", 2048, NATIVE_TOL),
    ("H100", "H100-SXM", "FlashAttention-3 (tritonbench flash_v3)", "tritonbench-1267", "native", 2048, NATIVE_TOL),
    ("B200", "B200", "cudnn (cudnn-frontend)", "cudnn-frontend-b200-artifacts", "native", 2048, NATIVE_TOL),
    ("B200", "B200", "FlashAttention-2 2.7.4 (native)", "cudnn-frontend-b200-artifacts", "flash", 4096, ATTN_TOL),
)


def _step_rates(gpu: str, impl: str, source: str) -> dict[int, float]:
    """Measured TFLOP/s of forward + 2.5x backward at one rate, per sequence length: 3.5 / (1/fwd + 2.5/bwd)."""
    rows = [r for r in _rows("attention.json") if r["gpu"] == gpu and r["source"] == source and r["causal"] is True
            and r["implementation"] == impl and r["precision"] == "bf16" and r["head_dim_qk"] == 128]
    fwd = {r["seqlen_q"]: r["tflops"] for r in rows if r["pass"] == "fwd"}
    bwd = {r["seqlen_q"]: r["tflops"] for r in rows if r["pass"] == "bwd"}
    return {n: 3.5 / (1.0 / fwd[n] + 2.5 / bwd[n]) for n in fwd if n in bwd}


def _class_rate(catalog_key: str, kernel: str, tokens: int) -> float:
    """The engine's rate [TFLOP/s] of a kernel class on ``tokens``-long key blocks (terms/attention.block_rate)."""
    gpu = gpu_spec(catalog_key)
    half_len = gpu.fused_attn_half_len(kernel)
    curve = native_block_rate(np.float64(tokens), half_len) if half_len > 0 else short_block_rate(np.float64(tokens))
    return gpu.peak_bf16_flops / 1e12 * gpu.fused_attn_eff(kernel) * float(curve)


@pytest.mark.parametrize("case", CLASS_ROWS, ids=lambda c: f"{c[0]}-{c[4]}-{c[2].split(' ')[0]}")
def test_each_attention_class_runs_at_its_kernels_measured_rate(case: tuple[Any, ...]) -> None:
    gpu, key, impl, source, kernel, shortest, tol = case
    measured = {n: v for n, v in _step_rates(gpu, impl, source).items() if shortest <= n <= 32768}
    assert len(measured) >= 2
    for n, rate in measured.items():
        engine = _class_rate(key, kernel, n)
        assert abs(engine / rate - 1.0) <= tol, f"{n} tokens: engine {engine:.0f}, measured {rate:.0f}"


def test_the_classes_are_apart_where_the_kernels_are() -> None:
    """On B200 cuDNN runs 8K-token attention 3.2x as fast as FlashAttention-2 (both measured); on H100 the native
    class is above FlashAttention-2's; on A100 the two are one class (FlashAttention-2 is Ampere's native kernel)."""
    native = _step_rates("B200", "cudnn (cudnn-frontend)", "cudnn-frontend-b200-artifacts")[8192]
    flash = _step_rates("B200", "FlashAttention-2 2.7.4 (native)", "cudnn-frontend-b200-artifacts")[8192]
    assert native / flash > 3.0
    b200 = gpu_spec("B200")
    assert b200.fused_attn_eff("native") / b200.fused_attn_eff("flash") > 3.0
    h100 = gpu_spec("H100-SXM")
    assert h100.fused_attn_eff("native") > 1.5 * h100.fused_attn_eff("flash")
    a100 = gpu_spec("A100-80GB")
    assert a100.fused_attn_eff("native") == a100.fused_attn_eff("flash")
