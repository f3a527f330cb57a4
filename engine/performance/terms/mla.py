"""Multi-head latent attention's projection GEMMs on one GPU for one micro-batch (engine.performance.attention_widths
holds the widths): the down-projections whole on every TP rank (Megatron-Core's duplicated linear layers), the
up-projections split by head, and what recomputing the up-projections costs (training.recompute_modules
"mla_up_proj", DeepSeek-V3 arXiv 2412.19437 Sec. 3.2.3). docs/performance-model.md s.2."""

from __future__ import annotations

import numpy as np

from engine.performance.context import Context, Layouts
from engine.performance.terms.kernels import gemm_time
from engine.performance.terms.shape import LayoutShape
from engine.units import Seconds


def mla_down_projection(ctx: Context, lay: Layouts, shape: LayoutShape) -> Seconds:
    """(M x h) @ (h x (r_q + r_kv + d_r)), not split by TP [s]."""
    ones = np.ones_like(lay.tp)
    return gemm_time(ctx, shape.microbatch_tokens, ctx.hidden * ones, ctx.attn.down_width * ones)


def mla_up_projections(ctx: Context, lay: Layouts, shape: LayoutShape) -> Seconds:
    """(M x r) @ (r x width / t) for the query and key/value up-projections (the query projection from h when
    there is no query latent) [s]."""
    ones = np.ones_like(lay.tp)
    out = np.zeros_like(np.asarray(lay.tp, dtype=np.float64))
    for width_in, width_out in ctx.attn.up_proj_in_widths:
        out = out + gemm_time(ctx, shape.microbatch_tokens, width_in * ones, width_out / lay.tp)
    return out


def mla_projections(ctx: Context, lay: Layouts, shape: LayoutShape) -> Seconds:
    """Every MLA projection GEMM before the attention core, forward [s]: down + up."""
    return mla_down_projection(ctx, lay, shape) + mla_up_projections(ctx, lay, shape)
