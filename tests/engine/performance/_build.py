"""Helpers for the step-model tests: one fully specified layout, and a collective model with a closed form.

The term tests compare each term with its equation written out by hand (docs/performance-model.md), not with the
engine's own output: ``LinearComm`` times every collective as bus bytes / one bandwidth, so a term's expected time
is a line of arithmetic in the test.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from engine.document.parse import parse_scenario
from engine.performance.api import candidate_layouts
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.context import Context, Layouts, make_context
from engine.performance.hardware import gpu_spec
from engine.performance.terms.groups import ParallelGroup
from engine.performance.terms.shape import LayoutShape, layout_shape
from tests.engine._scenarios import GPT_22B, LLAMA_7B, scenario

BW = 1e11  # bytes/s of the closed-form collective model
# bus bytes per byte of buffer in the closed form: an all-reduce moves its buffer twice (reduce-scatter + gather)
BUS_FACTOR = {CollectiveKind.ALL_REDUCE: 2.0, CollectiveKind.ALL_GATHER: 1.0, CollectiveKind.REDUCE_SCATTER: 1.0,
              CollectiveKind.ALL_TO_ALL: 1.0}

MOE_22B = dict(copy.deepcopy(GPT_22B), moe={"experts": 16, "top_k": 2, "expert_ffn_hidden": 4096, "shared_experts": 1,
                                          "dense_layers": 4})


class LinearComm:
    """A GroupComm whose every collective takes bus bytes / BW, no latency; it logs each call."""

    def __init__(self, n: int = 1) -> None:
        self.calls: list[tuple[str, CollectiveKind | str, float]] = []
        self.n = n

    def time(self, kind: CollectiveKind, nbytes: np.ndarray, group: ParallelGroup) -> np.ndarray:
        self.calls.append((str(group), kind, float(np.asarray(nbytes).reshape(-1)[0])))
        return np.asarray(nbytes * BUS_FACTOR[kind] / BW, dtype=np.float64)

    def moe_alltoall(self, tokens: np.ndarray, per_token_bytes: float, top_k: float) -> np.ndarray:
        self.calls.append(("ep", "moe_a2a", float(np.asarray(tokens).reshape(-1)[0]) * per_token_bytes))
        return np.asarray(tokens * per_token_bytes * top_k / BW, dtype=np.float64)

    def p2p(self, nbytes: np.ndarray) -> np.ndarray:
        self.calls.append(("pp", "p2p", float(np.asarray(nbytes).reshape(-1)[0])))
        return np.asarray(nbytes / BW, dtype=np.float64)

    def on_nic(self, group: ParallelGroup) -> np.ndarray:
        return np.ones(self.n, dtype=bool)


def build(doc: dict[str, Any]) -> tuple[Context, Layouts, LayoutShape]:
    """Context, the one layout and its shape of a fully specified scenario document."""
    s = parse_scenario(doc)
    lay = candidate_layouts(s)
    assert len(lay) == 1, "the test scenario must fix every setting"
    ctx = make_context(s, gpu_spec(s.cluster.gpu))
    return ctx, lay, layout_shape(ctx, lay)


def dense_doc(tp: int = 8, pp: int = 1, cp: int = 1, gpus: int = 64, zero: int = 1, recompute: str = "none",
              mb: int = 1, gb: int = 64, vpp: int = 1, sp: bool = True, model: dict[str, Any] | None = None,
              **training: Any) -> dict[str, Any]:
    return scenario(model=model or LLAMA_7B,
                    training={"global_batch": gb, "micro_batch": mb, "recompute": recompute, "zero": zero, **training},
                    parallelism={"tp": tp, "pp": pp, "cp": cp, "ep": 1, "vpp": vpp, "sequence_parallel": sp},
                    cluster={"gpus": gpus})


def moe_doc(tp: int = 1, ep: int = 8, gpus: int = 64, dispatcher: str = "alltoall", recompute: str = "none",
            framework: str = "auto", pp: int = 1, gb: int = 64) -> dict[str, Any]:
    return scenario(model=MOE_22B,
                    training={"global_batch": gb, "micro_batch": 1, "recompute": recompute, "zero": 1,
                              "moe_dispatcher": dispatcher, "framework": framework},
                    parallelism={"tp": tp, "pp": pp, "cp": 1, "ep": ep, "vpp": 1, "sequence_parallel": tp > 1},
                    cluster={"gpus": gpus})


def gemm_by_hand(ctx: Context, m: float, k: float, n: float, count: float = 1.0, bf16: bool = False,
                 kernel_eff: float = 1.0) -> float:
    """docs/performance-model.md s.2: t = 2MKN / (P eta) sqrt(1 + (R/I)^2) + 3 us, I = 2MKN / bytes(MK + KN + MN),
    R = P eta / HBM_bw; outputs bf16."""
    fp8 = ctx.precision == "fp8" and not bf16
    peak = ctx.gpu.peak_fp8_flops if fp8 and ctx.gpu.peak_fp8_flops else ctx.gpu.peak_bf16_flops
    eta = ctx.gpu.gemm_eff_fp8 if fp8 else ctx.gpu.gemm_eff_bf16
    rate = peak * eta * kernel_eff
    in_bytes = 1.0 if fp8 else 2.0
    flops = 2.0 * m * k * n
    intensity = flops / (in_bytes * (m * k + k * n) + 2.0 * m * n)
    return count * (flops / rate * (1.0 + (rate / ctx.gpu.hbm_bw / intensity) ** 2) ** 0.5 + 3e-6)


def hbm_by_hand(ctx: Context, nbytes: float) -> float:
    """Memory-bound pass at 0.8 of HBM bandwidth."""
    return nbytes / (0.8 * ctx.gpu.hbm_bw)
