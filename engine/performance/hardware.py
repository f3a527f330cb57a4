"""GPU and fabric constants: one set per GPU family and per fabric, each with its source or reasoning.

Datasheet figures (peak TFLOP/s, HBM, NVLink, TDP, default NIC) come from the catalog (data/gpus.json) so
that a platform catalog version can override them. The constants here describe how much of a datasheet
figure real kernels and collectives reach; they are the same for every scenario (never per validation row).
A catalog item may override a family constant by carrying the same key in its ``specs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.catalog import CatalogItems, get_item
from engine.errors import ScenarioError
from engine.units import GIGA, TERA

# ------------------------------------------------------------------------------------------ GPU families
# gemm_eff_bf16: fraction of dense bf16 peak the layer GEMMs sustain inside a real training step (before
#   the shape-dependent roofline term in terms/kernels.gemm_time, which lowers it further for thin matrices).
#   Upper bound: a measured 8192^3 bf16 matmul on H100 SXM reaches about 800 TFLOP/s = 0.81 of 989
#   (reference hardware notes); cuBLAS on A100 reaches about 0.8-0.9 of 312. In a step the GPU sits at its
#   power limit for minutes (700 W H100 SXM, 400 W A100) and tensor clocks fall below the boost clock the
#   datasheet peak assumes; GEMM shapes are rarely square multiples of the tile; framework gaps between
#   kernels add up. These are not modelled separately: one sustained factor per family is calibrated
#   against the family's published runs (tests/data/published_runs.json) with every other term of the
#   model in place, and the same value serves every scenario of that family.
#     ampere 0.66 (5 Megatron SC21 rows + 4 Korthikanti rows), hopper 0.52 (Llama 3, MPT rows), i.e. about
#     0.82 and 0.64 of the short-benchmark ceiling. Set beside a TP overlap share that engine 2.17.0 replaced by
#     Megatron's own asynchronous backward (frameworks.py) and left as set rather than fitted to rows again (they
#     wait for a component replacement): solved on their rows alone now they would be 0.72 / 0.51 / 0.48 (fp8);
#     leave-one-source-out refits them per held-out source either way (engine/validation/refit.py).
#     Blackwell: Hopper's values (same power-limited regime),
#     checked - not fitted - against 8 published DGX-B200 rows (tests/data/blackwell_runs.json, NeMo 25.02 and
#     Megatron-Bridge 25.11): no common-sign bias (mean -6%), so no separate set (docs/performance-model.md s.12).
# gemm_eff_fp8: fraction of dense fp8 peak; fp8 GEMMs reach a lower fraction of their (2x) peak than bf16
#   (about 1,300-1,400 of 1,979 TFLOP/s on large shapes, 0.66-0.70, Transformer Engine / cuBLASLt
#   benchmarks, vs 0.81 for bf16). Calibrated with the two NeMo fp8 rows: 0.50 (0.50/0.52 = 0.96 of the
#   bf16 fraction, consistent with 0.68/0.81 = 0.84-0.86 once casts and scaling, modelled separately as
#   HBM traffic, are taken out). Attention and all non-GEMM work stay at bf16 speed (below).
# attn_eff: fraction of dense bf16 peak reached by a fused (FlashAttention-2 / cuDNN) attention kernel,
#   forward+backward, on the work it does; causal kernels do half of the counted (non-causal) FLOPs.
#   Measured, not fitted: FlashAttention-2 fwd+bwd on A100 about 160-190 of 312 TFLOP/s for causal
#   head-dim 128 (Dao 2023) -> 0.55; on H100 about 335 of 989 (FlashAttention-3 paper, Shah et al. 2024)
#   -> 0.35. Unfused attention (scores in HBM, Megatron-LM 2021-22, the Ampere default below) does not use
#   this constant: it is modelled as score GEMMs + HBM traffic (UNFUSED_SCORE_BYTES_*), which replaced a
#   fitted 0.10-of-peak figure for the A100 reference rows. attn_eff is the FlashAttention-2 class (training.attention
#   "flash"). Blackwell: FlashAttention-2 2.7.4 on B200 (components/attention.json, cudnn-frontend-b200-artifacts,
#   causal, head dim 128, 8K tokens, the sequence length of the 2024-26 recipes) runs forward 400 and backward 318 of
#   2,250 TFLOP/s: one rate for the forward and the 2.5x backward (terms/attention.py), 3.5 / (1/0.178 + 2.5/0.141)
#   = 0.15 (FlashAttention-2 has no Blackwell kernels; it runs its Ampere path). FlashAttention-2's curve is flat from
#   2K-token blocks up (terms/attention.short_block_rate: 8K = 2K); on B200 its rate still rises 16% from 4K to 16K.
# attn_eff_native: the architecture-native class (training.attention "native": cuDNN fused attention, FlashAttention-3
#   on Hopper, -4 on Blackwell), the same reduction from measured forward and backward rates at 8K (attention.json):
#   Hopper: cuDNN (cudnn-frontend SDPA) on H200, causal, head dim 128, 64/8 heads, forward 644 and backward 541 of
#   989: 3.5 / (1/0.651 + 2.5/0.547) = 0.57 (FlashAttention-3 on H100, tritonbench, 685 / 539: 0.58, the same);
#   Blackwell: cuDNN (cudnn-frontend) on B200 forward 1,384 and backward 995 of 2,250: 0.48. Ampere's native
#   kernels are FlashAttention-2's own (mma.sync): attn_eff.
# attn_native_half_len [tokens]: the native kernels keep gaining past 2K-token key blocks; their measured step rate
#   follows L / (L + L_h) (terms/attention.native_block_rate, relative to 8K). L_h from the same rows, least squares
#   on log rate over 2K-32K: cuDNN on H200 1,250 (every row within 3%: 2K 0.40 measured / 0.41 curve, 32K 0.62 /
#   0.63), cuDNN on B200 2,450 (within 4%). 0 = the FlashAttention-2 curve (Ampere, whose native class it is).
# nvlink_ring_eff: NCCL ring bus bandwidth / unidirectional NVLink line rate (AG/RS and non-NVLS AR).
#   A100: 230 GB/s measured (NVIDIA/nccl-tests issue 175) / 300 = 0.77.
#   H100: 370 GB/s (NVIDIA/nccl-tests issue 212) / 450 = 0.82. Blackwell: assumed as Hopper.
# nvlink_ar_eff: all-reduce bus bandwidth / unidirectional line rate. Hopper and later reduce in the
#   NVSwitch (NVLS): 480 GB/s measured on H100 (nccl-tests 212, 290) / 450 = 1.07; check: H800 gives
#   1.07 x 200 = 213 GB/s vs 215 measured (NVIDIA/nccl issue 1374). A100 has no NVLS: ring 0.77.
FAMILY_CONSTANTS: dict[str, dict[str, float]] = {
    "ampere": {"gemm_eff_bf16": 0.66, "gemm_eff_fp8": 0.0, "attn_eff": 0.55, "attn_eff_native": 0.55, "attn_native_half_len": 0.0,
               "nvlink_ring_eff": 0.77, "nvlink_ar_eff": 0.77},
    "hopper": {"gemm_eff_bf16": 0.52, "gemm_eff_fp8": 0.50, "attn_eff": 0.35, "attn_eff_native": 0.57, "attn_native_half_len": 1250.0,
               "nvlink_ring_eff": 0.82, "nvlink_ar_eff": 1.07},
    "blackwell": {"gemm_eff_bf16": 0.52, "gemm_eff_fp8": 0.50, "attn_eff": 0.15, "attn_eff_native": 0.48, "attn_native_half_len": 2450.0,
                  "nvlink_ring_eff": 0.82, "nvlink_ar_eff": 1.07, "gemm_eff_nvfp4": 0.39},
}
# Block-scaled formats (Blackwell, issue #22 item 7). Peak rates per GPU: catalog mxfp8_dense_tflops /
# nvfp4_dense_tflops (datasheets); a GPU without the key does not support the format (refused naming
# training.precision: check_precision).
# MXFP8 GEMM efficiency: MXFP8 runs in the tensor-core instruction at the fp8 rate (PTX tcgen05.mma
#   kind::mxf8f6f4, scales applied inside the MMA), so it takes gemm_eff_fp8; no separate measurement in the
#   component data.
# gemm_eff_nvfp4: measured fraction of the fp4 peak relative to bf16's, times gemm_eff_bf16 (as gemm_eff_fp8 was
#   reasoned): B200, 8192^3, cuBLAS (cublasTest 13.3) 5,239 TFLOP/s = 0.58 of 9,000 (deepseek-ai/DeepGEMM PR 348,
#   table 'Dense GEMM perf (B200, CUDA 12.9)'; DeepGEMM's own kernel 5,702 = 0.63) against B200 bf16 best shape
#   1,745 of 2,250 = 0.78 (components/gemm.json gemm-0006): 0.58 / 0.78 x 0.52 = 0.39. Cross-check: vLLM PR
#   20646 (CUTLASS NVFP4, N=6144 K=4096, M=16384) 3,904 TFLOP/s without quantisation vs 1,360 bf16 on the same
#   shape: 0.43 / 0.60 x 0.52 = 0.37. Weak (two kernel benchmarks, no training-step measurement).
# NVIDIA's NVFP4 pretraining recipe (Mahabaleshwarkar et al., "Pretraining Large Language Models with NVFP4",
# arXiv 2509.25149, Sec. 4.1): the first two and the last eight of the 12B model's 62 blocks keep their linear
# layers in bf16 (about 16% of the linear layers); every other linear layer runs fprop, dgrad and wgrad in
# NVFP4. The attention core (softmax(QK^T)V), norms, embeddings and the output layer stay bf16 (also in MXFP8:
# Megatron-Core's --fp8-recipe mxfp8 quantises the Transformer Engine linear layers only).
NVFP4_BF16_LINEAR_FRACTION = 10.0 / 62.0
# GEMM operand bytes per element of the block-scaled formats: NVFP4 0.5 B + one E4M3 scale per 16 elements;
# MXFP8 1 B + one E8M0 scale per 32 (OCP Microscaling Formats v1.0; NVFP4: arXiv 2509.25149 Sec. 2).
NVFP4_OPERAND_BYTES = 0.5 + 1.0 / 16.0
MXFP8_OPERAND_BYTES = 1.0 + 1.0 / 32.0
# Quantisation of a GEMM operand (Transformer Engine, row-wise and column-wise copies for fprop and wgrad):
# MXFP8: read bf16 (2 B), write both copies with their scales 2 x (1 + 1/32) B = 4.06 B per element (no amax
# pass: block scales are local). NVFP4: read bf16 (2 B), write both copies 2 x (0.5 + 1/16) B, plus a read of the
# tensor for the per-tensor amax the second scaling level needs (2 B; the Random Hadamard transform of the wgrad
# copy is fused into the cast) = 5.13 B per element.
MXFP8_CAST_BYTES = 2.0 + 2.0 * MXFP8_OPERAND_BYTES
NVFP4_CAST_BYTES = 2.0 + 2.0 * NVFP4_OPERAND_BYTES + 2.0

# ------------------------------------------------------------------------------------- kernel-level terms
# Elementwise / normalisation kernels are memory bound; well-written fused kernels reach 80-90% of HBM
# bandwidth (STREAM-like copy on H100 about 2.9-3.0 of 3.35 TB/s). 0.80 used.
HBM_EFF = 0.80
# Fixed cost per kernel (launch gap, ramp-up and tail wave), about 2-4 us on current GPUs without CUDA graphs.
KERNEL_OVERHEAD_S = 3e-6
# Causal attention kernels skip the masked half of the score blocks: they do 0.5 of the counted
# (non-causal, Megatron/PaLM convention) attention-core FLOPs. Speed: family constant attn_eff above.
ATTN_CAUSAL_WORK = 0.5
# Bytes of HBM traffic per weight per Adam step: read fp32 master, m, v, grad (16 B), write master, m, v
# (12 B) and the bf16 working copy (2 B) = 30 B.
OPTIMIZER_BYTES_PER_PARAM = 30.0
# With bf16 Adam moments (training.optimizer_moments): read master 4, m 2, v 2, grad 4 (12 B), write master, m, v
# (8 B) and the bf16 working copy (2 B) = 22 B.
OPTIMIZER_BYTES_PER_PARAM_BF16_MOMENTS = 22.0
# Unfused attention (scores in HBM): bytes moved per score element beyond the QK^T / AV GEMMs.
# Forward: fused scale-mask-softmax reads and writes bf16 (4 B); dropout reads, writes and stores a
# 1-byte mask (5 B). Backward: dropout gradient reads grad + mask and writes (5 B); softmax gradient reads
# grad and probabilities and writes (6 B). Megatron-LM's kernels of 2021-22 (Korthikanti et al. 2022 Sec. 4).
UNFUSED_SCORE_BYTES_FWD = 9.0
UNFUSED_SCORE_BYTES_BWD = 11.0
# fp8 cast of a GEMM operand with Transformer Engine's fused cast-transpose: read bf16 (2 B), write the fp8
# tensor and its transpose (1 B each) = 4 B per element (TE delayed/current-scaling recipes).
FP8_CAST_BYTES = 4.0
# Attention kernel class a scenario gets when training.attention is "auto" and its stack does not decide it
# (frameworks.default_attention: Transformer Engine stacks run cuDNN on Hopper and Blackwell from dated releases):
# the GPU generation's default. Ampere-era production stacks (Megatron-LM / Megatron-DeepSpeed 2021-22)
# materialised the scores; on Hopper the flash-attn package (FlashAttention-2) and PyTorch SDPA's flash backend;
# on Blackwell, where FlashAttention-2 has no native kernels, cuDNN (Transformer Engine prefers it on sm90+ from
# 544dd14b4, 2025-02; PyTorch's SDPA prefers it on sm90/sm100 once its bundled cuDNN passes 9.15). Scenarios that
# used FlashAttention on A100 (e.g. MPT, LLaMA) say training.attention = "flash".
FAMILY_ATTENTION = {"ampere": "unfused", "hopper": "flash", "blackwell": "native"}
# Routed-expert (grouped) GEMMs of MoE layers. Until CUTLASS 3.4 (2024-01) added SM90 grouped GEMM, the
# grouped kernels MoE stacks used on Hopper were Ampere (SM80) kernels built on warp-level mma.sync, not on
# Hopper's warpgroup wgmma that dense cuBLAS GEMMs (and gemm_eff above) use; cuBLAS's own grouped APIs
# (12.5, 2024) "only leverage warp-level MMA instructions" (NVIDIA technical blog, "Introducing Grouped
# GEMM APIs in cuBLAS"). Measured on H100, relative to Hopper-native kernels on the same problems:
#   CUTLASS SM80 grouped GEMM about 30% slower than a loop of cuBLAS GEMMs (NVIDIA/cutlass issue 1280) -> 0.77;
#   tgale96/grouped_gemm (Megatron-Core's --moe-grouped-gemm backend): CUTLASS SM80 116.9 vs CUTLASS SM90
#   cooperative 160.5 TFLOP/s on 128 experts (grouped_gemm PR 37) -> 0.73;
#   mma.sync reaches about 2/3 of H100's tensor peak (FlashAttention-3, Shah et al. 2024) against 0.81 for
#   wgmma cuBLAS (the ceiling behind gemm_eff) -> 0.82.
# 0.77 (the middle figure) multiplies the GEMM rate of routed experts with "warp-mma" kernels. Ampere's own
# kernels are warp-level (factor 1). Default ("auto") per family: Hopper bf16 MoE training stacks of
# 2023-24 (Megatron-Core grouped_gemm, DeepSeek's HAI-LLM, MegaScale-MoE) ran SM80-class grouped kernels;
# fp8 expert GEMMs need Hopper's fp8 tensor-core path (Transformer Engine / cuBLASLt per-expert GEMMs,
# DeepGEMM), so fp8 is "native"; Blackwell stacks use tcgen05 grouped kernels (CUTLASS SM100, cuBLAS 12.8+).
# A 2025+ Hopper bf16 stack on CUTLASS 3.x SM90 grouped GEMM or TE GroupedLinear says expert_kernel "native".
WARP_MMA_GROUPED_EFF = 0.77
FAMILY_EXPERT_KERNEL = {"ampere": "native", "hopper": "warp-mma", "blackwell": "native"}


def expert_kernel_factor(family: str, precision: str, choice: str | None) -> float:
    """GEMM-rate factor of routed-expert GEMMs: WARP_MMA_GROUPED_EFF for warp-level kernels on a GPU whose
    dense GEMMs use newer instructions (Hopper and later), 1.0 otherwise."""
    if family == "ampere":
        return 1.0
    if choice is None:
        choice = "native" if precision == "fp8" else FAMILY_EXPERT_KERNEL.get(family, "native")
    return WARP_MMA_GROUPED_EFF if choice == "warp-mma" else 1.0

# ------------------------------------------------------------------------------------------------ fabric
# NCCL bus bandwidth per NIC / line rate on InfiniBand: 46-48 GB/s on 400G NDR (nccl-tests issue 290) and
# 192 GB/s on 8x200G HDR (nccl issue 812) -> 0.94-0.96; 0.95 used. RoCE's extra framing and DCQCN headroom
# are applied on top of it (context.nic_rate, engine.fabric.routing: ROCE_FRAMING_EFF, DCQCN_HEADROOM_EFF).
NIC_PROTOCOL_EFF = 0.95
# Nodes whose same-index NICs share one leaf switch. Fat-tree (not rail-optimized): a 64-port leaf has 32
# down ports = 4 nodes of 8 NICs. Rail-optimized DGX SuperPOD and multi-plane: one leaf per rail / plane
# spans a scalable unit of 32 nodes (H100/B200 SuperPOD reference architecture).
LEAF_NODES = {"fat-tree": 4.0, "rail-optimized": 32.0, "multi-plane": 32.0}

# Memory: allocator fragmentation / caching reserve (5% of HBM) and CUDA context + NCCL / cuBLAS workspaces
# (1 GB): usable = HBM x 0.95 - 1 GB (docs/performance-model.md s.6).
MEMORY_FRAGMENTATION = 0.05
MEMORY_FIXED_GB = 1.0

# A collective hidden behind compute is not free: NCCL kernels occupy SMs (16-32 channels = 12-24% of
# an H100's 132 SMs for NVLink/IB collectives) and their copies compete for HBM bandwidth. Compute is
# slowed by this fraction of the hidden communication time.
OVERLAP_INTERFERENCE = 0.25
# A catalog GPU without a default NIC speed gets 400 Gb/s (one NDR / 400G Ethernet NIC per GPU, the H100 norm).
DEFAULT_NIC_GBPS = 400.0
# NVLink figures in the catalog are bidirectional GB/s; collectives read one direction.
NVLINK_DIRECTIONS = 2.0


@dataclass(frozen=True)
class GpuSpec:
    key: str
    family: str
    peak_bf16_flops: float
    peak_fp8_flops: float | None
    hbm_bytes: float
    hbm_bw: float  # bytes/s
    nvlink_uni_bw: float  # bytes/s, one direction
    tdp_w: float
    default_nic_gbps: float
    gemm_eff_bf16: float
    gemm_eff_fp8: float
    attn_eff: float  # FlashAttention-2 class (training.attention "flash")
    attn_eff_native: float  # architecture-native class (training.attention "native") at 8K-token blocks
    attn_native_half_len: float  # tokens: the native class's block-length curve (0: FlashAttention-2's)
    nvlink_ring_eff: float
    nvlink_ar_eff: float
    default_attention: str = "flash"  # the family's kernel class where the stack does not decide (FAMILY_ATTENTION)
    peak_mxfp8_flops: float | None = None  # None: the GPU has no block-scaled fp8 (refused: check_precision)
    peak_nvfp4_flops: float | None = None
    gemm_eff_nvfp4: float = 0.0

    def peak(self, precision: str) -> float:
        if precision == "fp8":
            if self.peak_fp8_flops is None:
                return self.peak_bf16_flops
            return self.peak_fp8_flops
        if precision == "mxfp8" and self.peak_mxfp8_flops is not None:
            return self.peak_mxfp8_flops
        if precision == "nvfp4" and self.peak_nvfp4_flops is not None:
            return self.peak_nvfp4_flops
        return self.peak_bf16_flops

    def fused_attn_eff(self, kernel: str) -> float:
        """Fraction of bf16 peak of a fused attention kernel class ("native" or "flash") at its reference block
        length (8K tokens native, 2K flash: terms/attention.py)."""
        return self.attn_eff_native if kernel == "native" else self.attn_eff

    def fused_attn_half_len(self, kernel: str) -> float:
        """The block-length curve of a fused kernel class [tokens]: 0 for FlashAttention-2's."""
        return self.attn_native_half_len if kernel == "native" else 0.0

    def gemm_eff(self, precision: str) -> float:
        if precision == "fp8" and self.peak_fp8_flops is not None:
            return self.gemm_eff_fp8
        if precision == "mxfp8" and self.peak_mxfp8_flops is not None:
            return self.gemm_eff_fp8  # MXFP8 runs at the fp8 rate (above)
        if precision == "nvfp4" and self.peak_nvfp4_flops is not None:
            return self.gemm_eff_nvfp4
        return self.gemm_eff_bf16


def check_precision(gpu: GpuSpec, precision: str) -> None:
    """Refuse a block-scaled precision (mxfp8, nvfp4) on a GPU whose catalog entry has no rate for it."""
    peaks = {"mxfp8": gpu.peak_mxfp8_flops, "nvfp4": gpu.peak_nvfp4_flops}
    if precision in peaks and peaks[precision] is None:
        raise ScenarioError("training.precision", f"{precision} needs tensor cores {gpu.key} does not have "
                            "(Blackwell: B200, B300, GB200, GB300); use bf16 or fp8")


def gpu_spec(key: str, catalog: CatalogItems | None = None, field: str = "cluster.gpu") -> GpuSpec:
    item = get_item(key, "gpu", field, catalog)
    specs: dict[str, Any] = item.get("specs", {})
    family = str(specs.get("family", "hopper"))
    consts = dict(FAMILY_CONSTANTS.get(family, FAMILY_CONSTANTS["hopper"]))
    for name in consts:
        if specs.get(name) is not None:
            consts[name] = float(specs[name])
    fp8 = specs.get("fp8_dense_tflops")
    mxfp8, nvfp4 = specs.get("mxfp8_dense_tflops"), specs.get("nvfp4_dense_tflops")
    return GpuSpec(
        key=key,
        family=family,
        peak_bf16_flops=float(specs["bf16_dense_tflops"]) * TERA,
        peak_fp8_flops=float(fp8) * TERA if fp8 else None,
        hbm_bytes=float(specs["hbm_gb"]) * GIGA,
        hbm_bw=float(specs["hbm_tbps"]) * TERA,
        nvlink_uni_bw=float(specs["nvlink_gbytes_per_s"]) * GIGA / NVLINK_DIRECTIONS,
        tdp_w=float(specs.get("tdp_w") or item.get("power_w") or 0.0),
        default_nic_gbps=float(specs.get("default_nic_gbps", DEFAULT_NIC_GBPS)),
        gemm_eff_bf16=consts["gemm_eff_bf16"],
        gemm_eff_fp8=consts["gemm_eff_fp8"],
        attn_eff=consts["attn_eff"],
        attn_eff_native=consts["attn_eff_native"],
        attn_native_half_len=consts["attn_native_half_len"],
        nvlink_ring_eff=consts["nvlink_ring_eff"],
        nvlink_ar_eff=consts["nvlink_ar_eff"],
        default_attention=str(specs.get("default_attention") or FAMILY_ATTENTION.get(family, "flash")),
        peak_mxfp8_flops=float(mxfp8) * TERA if mxfp8 else None,
        peak_nvfp4_flops=float(nvfp4) * TERA if nvfp4 else None,
        gemm_eff_nvfp4=consts.get("gemm_eff_nvfp4", 0.0),
    )
