"""The transformer block's form: serial or parallel (``model.parallel_block``). docs/performance-model.md s.2.

Serial (GPT-3, Llama): y = x + Attn(LN1(x)), z = y + FFN(LN2(y)): two stages, each a layernorm, a sublayer and a
residual add. Parallel (GPT-J, Wang & Komatsuzaki 2021; PaLM, Chowdhery et al. 2022 Sec. 2 "Parallel Layers";
MegaScale, Jiang et al. NSDI'24 Sec. 3.1): z = x + Attn(LN(x)) + FFN(LN(x)): one stage, one layernorm whose output
feeds both sublayers, one residual add of both branches. Same GEMMs and FLOPs; what changes is per token:

- layernorms and their traffic (read + write h each), what the backward keeps (each stage keeps its layernorm's
  input and output: 2 x 2h bytes, one GEMM input in fp8 where the recipe quantises it), and what selective
  recomputation of "layernorm" redoes and drops: ``stages`` of each;
- the residual adds: each stage reads the residual stream once and writes it once, and each branch's output is
  read once with its dropout mask (:func:`residual_add_elems_per_h`);
- the h-wide output gradients the fp8 backward casts: one per stage (both branches' outputs get the same gradient);
- tensor-parallel output reductions: the row-parallel outputs of both branches are added before one reduction
  (all-reduce; reduce-scatter with sequence parallelism) per stage, GPT-NeoX's ``gpt_j_residual`` (EleutherAI/
  gpt-neox eb02115b, 2021-09-29, "reduce after adding attention + mlp outputs"); with sequence parallelism that
  reduce-scatter's backward is one all-gather of the output gradient per stage. Each column-parallel linear keeps
  its own input side (the all-gather of its input and the reduction of its input gradient), as there
  (:func:`merged_output_pairs`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from engine.performance.context import Context
from engine.units import Count

SERIAL_STAGES = 2.0  # attention, then FFN: two layernorms, two residual adds, two output reductions
PARALLEL_STAGES = 1.0  # both branches from one layernorm into one residual add
BRANCHES = 2.0  # attention and FFN, in either form
LAYERNORM_PASSES = 2.0  # a layernorm reads h and writes h per token
KERNELS_PER_STAGE = 2.0  # memory-bound launches a stage has of its own: its layernorm and its residual add
# a residual add reads the residual stream and writes it (2 passes of h a stage); each branch output is read with
# its hidden-dropout mask (2 passes of h a branch; the mask is counted whether or not dropout is on, as the serial
# 12h always was: docs/performance-model.md s.2)
RESIDUAL_PASSES_PER_STAGE = 2.0
BRANCH_PASSES = 2.0
# of a tensor-parallel pair (all-reduce, or all-gather + reduce-scatter), the share one reduce-scatter or one
# all-gather is (sequence parallelism splits each all-reduce into the two halves)
HALF_PAIR = 0.5


def block_stages(ctx: Context) -> float:
    """Layernorm -> sublayer(s) -> residual-add stages of one layer: 2 serial, 1 parallel [count]."""
    return PARALLEL_STAGES if ctx.parallel_block else SERIAL_STAGES


def stage_share(ctx: Context) -> float:
    """The block's stages as a share of the serial block's [ratio]: 1 serial, 1/2 parallel. Scales every per-stage
    figure the serial block's constants count twice (layernorms, their kept tensors and fp8 copies, the h-wide
    output gradients)."""
    return block_stages(ctx) / SERIAL_STAGES


def residual_add_elems_per_h(ctx: Context) -> float:
    """HBM elements per token per layer of the residual adds, forward, in units of h: each stage reads and writes the
    residual stream, each branch's output is read with its mask: serial 2 x 2 + 2 x 2 = 8, parallel 1 x 2 + 2 x 2
    = 6 [h elements]."""
    return RESIDUAL_PASSES_PER_STAGE * block_stages(ctx) + BRANCH_PASSES * BRANCHES


def replicated_elementwise_per_h(ctx: Context) -> float:
    """HBM elements per token per layer of the passes outside the tensor-parallel regions, forward, in units of h
    (divided by t only with sequence parallelism): the layernorms (2h each) and the residual adds: serial 4 + 8 =
    12, parallel 2 + 6 = 8 [h elements]."""
    return LAYERNORM_PASSES * block_stages(ctx) + residual_add_elems_per_h(ctx)


def elementwise_kernels_saved(ctx: Context) -> float:
    """Memory-bound kernel launches per layer forward the parallel block does not make: a layernorm and a residual
    add for each stage fewer than the serial block's two [count]; 0 serial, 2 parallel."""
    return KERNELS_PER_STAGE * (SERIAL_STAGES - block_stages(ctx))


def merged_output_pairs(ctx: Context, sp: npt.ArrayLike) -> tuple[Count, Count]:
    """(per forward pass, per backward pass) tensor-parallel pairs per layer that the parallel block saves against
    the serial block [pairs]: (2 - stages) output reductions a forward (an all-reduce is a pair, a reduce-scatter
    half of one under sequence parallelism), and with sequence parallelism the same number of output-gradient
    all-gathers a backward (none without it: an all-reduce's backward passes the gradient through). Zero for the
    serial block. Both are collectives the stack exposes (the asynchronous backward hides the input side only)."""
    merged = SERIAL_STAGES - block_stages(ctx)
    on = np.asarray(sp, dtype=bool)
    return merged * np.where(on, HALF_PAIR, 1.0), merged * np.where(on, HALF_PAIR, 0.0)
