"""One measured training run as the engine sees it: its scenario, its layout, and its predicted step time
under a candidate set of efficiencies (the inner loop of the GEMM fit)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.performance.api import candidate_layouts, rank_layouts
from engine.performance.calibrated import CONTEXT_FIELDS, apply_profile
from engine.performance.context import Context, Layouts, make_context
from engine.performance.hardware import gpu_spec
from engine.performance.model import evaluate
from engine.schema.calibration import Profile
from engine.schema.types import ScenarioSpec


def best_layout(ctx: Context, lay: Layouts) -> int:
    """Index of the fastest layout that fits (the fastest overall when none fits), as predict() picks."""
    order, _ = rank_layouts(evaluate(ctx, lay))
    return int(order[0])


def layout_dict(lay: Layouts, i: int = 0) -> dict[str, Any]:
    """Layout ``i`` as a document's parallelism section pins it (the names ``Result.parallelism`` uses, DP
    placement included, so a run the search placed DP outermost is re-pinned the same way)."""
    return lay.parallelism(i)


class RunModel:
    """A run's scenario with its layout pinned (a measured run had one layout: settings left "auto" are
    pinned to the layout the network-calibrated model picks, and the run says so)."""

    def __init__(self, run_id: str, doc: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None,
                 network: Profile | None) -> None:
        self.run_id = run_id
        self.s = parse_scenario(doc, catalog)
        self.ctx0 = make_context(self.s, gpu_spec(self.s.cluster.gpu, catalog))
        self.ctx_net = apply_profile(network, self.ctx0, gemm=False) if network is not None else self.ctx0
        self.notes: list[str] = []
        lay = candidate_layouts(self.s)
        if len(lay) > 1:
            i = best_layout(self.ctx_net, lay)
            lay = lay.take(np.asarray([i], dtype=np.intp))
            self.notes.append(f"run {run_id}: layout not fully given; pinned to the model's choice {layout_dict(lay)}")
        self.lay = lay
        self.layout = layout_dict(lay)

    def default_gemm(self) -> float:
        return self.ctx0.gpu.gemm_eff(self.ctx0.precision)

    def step_time(self, gemm_eff: Mapping[str, float] | None, profile: Profile | None, network: bool = True) -> float:
        """Predicted step time [s]: with ``profile`` applied whole (incl. residual factor), or with the network
        part of the fit and ``gemm_eff`` per precision key, or (network=False) the plain engine."""
        if profile is not None:
            ctx = apply_profile(profile, self.ctx0)
            factor = 1.0 if "step_time_scale" in CONTEXT_FIELDS else profile.residual_factor
            return float(evaluate(ctx, self.lay).step_time_s[0]) * factor
        ctx = self.ctx_net if network else self.ctx0
        if gemm_eff:
            g = ctx.gpu
            gpu = dataclasses.replace(g, gemm_eff_bf16=float(gemm_eff.get("bf16", g.gemm_eff_bf16)),
                                      gemm_eff_fp8=float(gemm_eff.get("fp8", g.gemm_eff_fp8)))
            ctx = dataclasses.replace(ctx, gpu=gpu)
        return float(evaluate(ctx, self.lay).step_time_s[0])
