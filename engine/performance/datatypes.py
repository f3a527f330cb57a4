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
