"""The optimizer step: Adam is memory bound, hardware.OPTIMIZER_BYTES_PER_PARAM per local parameter at HBM speed
(OPTIMIZER_BYTES_PER_PARAM_BF16_MOMENTS with bf16 moments, training.optimizer_moments),
over the states ZeRO >= 1 leaves on the GPU (routed experts sharded over their expert-data-parallel group)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.performance.context import ZERO_SHARDS_OPTIMIZER, Context, Layouts
from engine.performance.terms.kernels import hbm_time
from engine.performance.terms.parameters import GpuParams
from engine.performance.terms.shape import LayoutShape
from engine.performance.terms.sharding import shard_ranks
from engine.units import Count, Seconds


@dataclass(frozen=True)
class OptimizerStep:
    local_params: Count  # parameters whose states this GPU updates
    time_s: Seconds


def optimizer_step(ctx: Context, lay: Layouts, shape: LayoutShape, params: GpuParams) -> OptimizerStep:
    dense = params.total_params - params.expert_params
    local = (dense / shard_ranks(lay, ZERO_SHARDS_OPTIMIZER, shape.zero_shard_ranks)
             + params.expert_params / shard_ranks(lay, ZERO_SHARDS_OPTIMIZER, shape.expert_shard_ranks))
    return OptimizerStep(local_params=local, time_s=hbm_time(ctx, local * ctx.optimizer_bytes_per_param))
