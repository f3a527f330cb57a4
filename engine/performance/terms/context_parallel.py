"""Context-parallel communication of one layer, one micro-batch: all-gather of K and V forward, all-gather +
reduce-scatter of dK and dV backward over the CP group (stride t). Ring attention (``training.cp_comm_type``
``p2p``) overlaps them with the attention core they feed; the all-gather form (``all-gather``: Llama 3's, arXiv
2407.21783 s.3.3.2) gathers before the kernel and reduce-scatters after it, all in the critical path. The all-to-all
form (``a2a``, DeepSpeed-Ulysses, arXiv 2309.14509; Transformer Engine's AttnFuncWithCPAndQKVOA2A) exchanges each
rank's sequence shard of Q, K and V for the whole sequence of 1/c of its heads before the kernel and the output
back after it; the backward does the same with dO, dQ, dK and dV (:func:`ulysses_bytes`), all exposed. Full
recomputation reruns the forward's exchange (the ring's K/V all-gather, Ulysses' first all-to-all) on the layers it
checkpoints (shape.recomputed_forwards).
docs/performance-model.md s.3, s.3a."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.attention_widths import KV_TENSORS
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.context import Context, Layouts
from engine.performance.datatypes import BYTES_ACT
from engine.performance.terms.attention import AttentionCore
from engine.performance.terms.groups import GroupComm, ParallelGroup
from engine.performance.terms.shape import LayoutShape, recomputed_forwards
from engine.units import Bytes, Seconds

# K,V all-gather forward; all-gather and reduce-scatter of dK,dV backward (costed as all-gathers of the same bytes).
CP_COLLECTIVES_PER_LAYER = 3.0
CP_COLLECTIVES_FULL_RECOMPUTE = 1.0  # the recomputed forward's K,V all-gather
# Ulysses: one exchange of Q, K, V and the output per pass, forward and backward (dO before the kernel's backward,
# dQ, dK, dV after it); full recomputation's forward exchanges once more
ULYSSES_PASSES = 2.0
ULYSSES_PASSES_FULL_RECOMPUTE = 1.0
# Never hidden: the first ring step has no attention block to run under and the last finishes after its kernel;
# 10% of the ring is kept exposed (docs/performance-model.md s.3a; an assumption, not a measurement).
CP_EXPOSED_FLOOR = 0.1


@dataclass(frozen=True)
class ContextParallelComm:
    """Per layer and micro-batch."""

    kv_bytes: Bytes  # the gathered K and V of the full sequence per rank (ring and all-gather forms)
    alltoall_bytes: Bytes  # each rank's Q, K, V and output shard one all-to-all exchanges (a2a form; else 0)
    raw_s: Seconds  # the three collectives, four with full recomputation (the a2a form: two all-to-alls, three)
    exposed_s: Seconds  # alone, after hiding under the attention core (forward + backward), at least the floor
    floor_s: Seconds  # never hidden


def context_parallel_comm(ctx: Context, lay: Layouts, shape: LayoutShape, attn: AttentionCore,
                          groups: GroupComm) -> ContextParallelComm:
    cp = lay.cp
    kv_bytes = lay.mb * ctx.seq * KV_TENSORS * shape.kv_local_elems * BYTES_ACT
    redo = recomputed_forwards(ctx, lay)  # full recomputation reruns the layer's forward, its exchange with it
    if ctx.cp_a2a:
        a2a_bytes = ulysses_bytes(ctx, lay, shape)
        passes = ULYSSES_PASSES + redo * ULYSSES_PASSES_FULL_RECOMPUTE
        raw = passes * groups.time(CollectiveKind.ALL_TO_ALL, a2a_bytes, ParallelGroup.CP)
    else:
        a2a_bytes = np.zeros_like(np.asarray(cp, dtype=np.float64))
        gathers = CP_COLLECTIVES_PER_LAYER + redo * CP_COLLECTIVES_FULL_RECOMPUTE
        raw = gathers * groups.time(CollectiveKind.ALL_GATHER, kv_bytes, ParallelGroup.CP)
    floor = raw if ctx.cp_allgather or ctx.cp_a2a else CP_EXPOSED_FLOOR * raw
    # the ring hides under the attention it feeds: forward, backward and the recomputed forward
    exposed = np.maximum(0.0, raw - (attn.forward_s * (1.0 + redo) + attn.backward_s))
    return ContextParallelComm(kv_bytes=kv_bytes, alltoall_bytes=np.where(cp > 1, a2a_bytes, 0.0),
                               raw_s=np.where(cp > 1, raw, 0.0),
                               exposed_s=np.where(cp > 1, np.maximum(exposed, floor), 0.0),
                               floor_s=np.where(cp > 1, floor, 0.0))


def ulysses_bytes(ctx: Context, lay: Layouts, shape: LayoutShape) -> Bytes:
    """What one of the all-to-all (Ulysses) form's exchanges moves per rank [bytes]: its M = b s / c tokens of Q
    (a d_q / t wide), K and V (g d / t each) and the attention output (a d_v / t), bf16. The form runs
    ULYSSES_PASSES of them per layer and micro-batch (forward, backward), all exposed."""
    widths = ctx.attn.q / lay.tp + KV_TENSORS * shape.kv_local_elems + ctx.attn.o / lay.tp
    return shape.microbatch_tokens * widths * BYTES_ACT
