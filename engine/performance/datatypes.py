"""Bytes per element of the number formats a training step stores and moves (bf16 / fp32 mixed precision, fp8)."""

from __future__ import annotations

BF16_BYTES = 2.0
FP32_BYTES = 4.0
FP8_BYTES = 1.0
# Activations and activation gradients are bf16 in every stack the model covers (fp8 training casts GEMM
# inputs only, transiently: terms/layer.py, terms/memory.py).
BYTES_ACT = BF16_BYTES
# Model states per parameter in mixed-precision Adam (Megatron-Core, DeepSpeed, FSDP mixed precision): bf16
# working weights, fp32 main gradients, and fp32 master weights + Adam m + v.
WEIGHT_BYTES = BF16_BYTES
GRAD_BYTES = FP32_BYTES
ADAM_STATE_BYTES = 3.0 * FP32_BYTES
# training.optimizer_moments "bf16" (DeepSeek-V3 Sec. 3.3.3; Megatron-Core precision-aware optimizer): fp32 master
# weights, bf16 m and v.
ADAM_STATE_BYTES_BF16_MOMENTS = FP32_BYTES + 2.0 * BF16_BYTES
# One fp8 scale (fp32) per 1 x 128 tile of a tile-scaled fp8 activation (DeepSeek-V3 Sec. 3.3.2): bytes per element.
FP8_TILE_SCALE_BYTES = FP32_BYTES / 128.0
