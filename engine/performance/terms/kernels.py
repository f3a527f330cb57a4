"""Kernel times on one GPU: GEMMs on a smooth roofline, memory-bound passes at HBM speed, launch overhead.

GEMM: t = 2MKN / (P eta) sqrt(1 + (R/I)^2) + t_kernel, I = 2MKN / bytes, R = P eta / HBM_bw (docs/performance-
model.md s.2): near P eta for large matrices, bandwidth bound for thin ones.
"""

from __future__ import annotations

import numpy as np

from engine.performance import hardware as hw
from engine.performance.context import Context
from engine.performance.datatypes import BF16_BYTES
from engine.schema.enums import Precision
from engine.units import Bytes, Count, Seconds

FLOPS_PER_MAC = 2.0  # a multiply-add is two floating-point operations
# Backward of a GEMM is two GEMMs of the forward's size: the input gradient (dgrad) and the weight gradient (wgrad).
BWD_GEMM_FACTOR = 2.0
# Outputs of every GEMM stay bf16 (fp8 training casts inputs only).
GEMM_OUTPUT_BYTES = BF16_BYTES


def gemm_time(ctx: Context, m: Count, k: Count, n: Count, count: Count | float = 1.0, bf16: bool = False,
              kernel_eff: float = 1.0) -> Seconds:
    """Time of ``count`` GEMMs (m x k) @ (k x n) on one GPU.

    ``bf16`` forces bf16 (attention score GEMMs and the output layer in block-scaled training); ``kernel_eff``
    scales the sustained rate for kernels slower than the dense GEMMs (routed experts on warp-level grouped
    kernels). NVFP4: the recipe's bf16 share of the linear layers (hardware.NVFP4_BF16_LINEAR_FRACTION) runs at the
    bf16 rate, the rest at the NVFP4 rate.
    """
    if bf16:
        return _roofline(ctx, Precision.BF16, BF16_BYTES, m, k, n, count, kernel_eff)
    t = _roofline(ctx, ctx.precision, ctx.elem_bytes, m, k, n, count, kernel_eff)
    if ctx.precision != Precision.NVFP4:
        return t
    share = hw.NVFP4_BF16_LINEAR_FRACTION
    return (1.0 - share) * t + share * _roofline(ctx, Precision.BF16, BF16_BYTES, m, k, n, count, kernel_eff)


def low_precision_linear_share(ctx: Context) -> float:
    """Share of the linear-layer GEMMs that run in a quantised format (and so are cast): 0 in bf16 (or on a GPU
    without fp8 tensor cores), 1 - NVFP4_BF16_LINEAR_FRACTION in NVFP4, 1 otherwise."""
    if ctx.elem_bytes >= BF16_BYTES:
        return 0.0
    return 1.0 - hw.NVFP4_BF16_LINEAR_FRACTION if ctx.precision == Precision.NVFP4 else 1.0


def output_layer_bf16(ctx: Context) -> bool:
    """True where the output layer (logits GEMM) stays bf16: the block-scaled recipes quantise the transformer
    layers' linear layers only (arXiv 2509.25149 Sec. 4.1; Megatron-Core --fp8-recipe mxfp8)."""
    return ctx.precision in (Precision.MXFP8, Precision.NVFP4)


def _roofline(ctx: Context, precision: str, b: float, m: Count, k: Count, n: Count, count: Count | float,
              kernel_eff: float) -> Seconds:
    rate = ctx.gpu.peak(precision) * ctx.gpu.gemm_eff(precision) * kernel_eff
    flops = FLOPS_PER_MAC * m * k * n
    bytes_ = b * (m * k + k * n) + GEMM_OUTPUT_BYTES * m * n
    intensity = flops / bytes_
    ridge = rate / ctx.gpu.hbm_bw
    t = flops / rate * np.sqrt(1.0 + (ridge / intensity) ** 2)
    return count * (t + hw.KERNEL_OVERHEAD_S)


def hbm_time(ctx: Context, nbytes: Bytes) -> Seconds:
    """A memory-bound pass over ``nbytes`` at the sustained HBM bandwidth (hardware.HBM_EFF)."""
    return nbytes / (ctx.gpu.hbm_bw * hw.HBM_EFF)


def launches(kernels: Count | float) -> Count | float:
    """Fixed cost of ``kernels`` kernel launches [s] (hardware.KERNEL_OVERHEAD_S each)."""
    return kernels * hw.KERNEL_OVERHEAD_S
