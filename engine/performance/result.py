"""What ``predict`` and ``search`` return: one layout's figures (:class:`Result`), a losing alternative and
the search's winner with its alternatives. Times in seconds, rates per second, memory in GB (1e9 bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# the figures a layout that does not fit in memory does not have: None in the Result itself (and so in
# to_dict, the API, exports, prices and rankings), with the step-time breakdown
NULL_WHEN_UNFIT = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                   "hardware_tflops_per_gpu", "mfu", "hfu", "time_to_train_days", "gpu_hours",
                   "network_wait_fraction")


@dataclass
class Result:
    """Prediction for one layout. Times in seconds, rates per second, memory in GB (1e9 bytes).

    When ``fits`` is false the layout cannot run: every throughput figure (``NULL_WHEN_UNFIT``) and the
    breakdown are None here, so nothing can price, schedule or rank it. What it would reach with unlimited
    memory is kept apart, in ``unconstrained`` (diagnostics: the validation report's memory false negatives).
    """

    step_time_s: float | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    model_tflops_per_gpu: float | None
    hardware_tflops_per_gpu: float | None
    mfu: float | None
    hfu: float | None
    memory_gb_per_gpu: float
    memory_limit_gb: float
    fits: bool
    time_to_train_days: float | None
    gpu_hours: float | None
    network_wait_fraction: float | None
    breakdown_s: dict[str, float] | None
    parallelism: dict[str, Any]
    gpu: str = ""
    gpus: int = 0
    precision: str = "bf16"
    notes: list[str] = field(default_factory=list)
    fabric: dict[str, Any] = field(default_factory=dict)  # the cluster assumed (topology.fabric_block)
    # where the routing share came from: {"kind": "shipped", "table": ...} or {"kind": "study", "share": ...,
    # "study": {run, name, ...}} for a fabric study pinned to the scenario (pinned_study.py, issue #13)
    routing_source: dict[str, Any] = field(default_factory=dict)
    # 80% intervals {figure: [p10, p90]} from the validation's leave-one-source-out error bands for this regime
    # (engine.performance.error_bands); None when the layout does not fit
    intervals: dict[str, list[float]] | None = None
    # only when ``fits`` is false: the NULL_WHEN_UNFIT figures and breakdown_s with unlimited memory (never shown)
    unconstrained: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.fits and self.step_time_s is not None:
            # a layout that does not fit has no throughput: keep the figures for diagnostics only
            self.unconstrained = {key: getattr(self, key) for key in (*NULL_WHEN_UNFIT, "breakdown_s")}
            for key in (*NULL_WHEN_UNFIT, "breakdown_s", "intervals"):
                setattr(self, key, None)

    def figure(self, key: str) -> float | None:
        """A headline figure by name (None when the layout does not fit)."""
        value = getattr(self, key)
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "hardware_tflops_per_gpu": self.hardware_tflops_per_gpu,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "memory_gb_per_gpu": self.memory_gb_per_gpu,
            "memory_limit_gb": self.memory_limit_gb,
            "fits": self.fits,
            "time_to_train_days": self.time_to_train_days,
            "gpu_hours": self.gpu_hours,
            "network_wait_fraction": self.network_wait_fraction,
            "breakdown_s": dict(self.breakdown_s) if self.breakdown_s is not None else None,
            "parallelism": dict(self.parallelism),
            "gpu": self.gpu,
            "gpus": self.gpus,
            "precision": self.precision,
            "notes": list(self.notes),
            "fabric": dict(self.fabric),
            "routing_source": dict(self.routing_source),
            "intervals": {k: list(v) for k, v in self.intervals.items()} if self.intervals is not None else None,
        }


@dataclass
class Alternative:
    result: Result
    why: str

    def to_dict(self) -> dict[str, Any]:
        d = self.result.to_dict()
        d["why_it_loses"] = self.why
        return d


@dataclass
class SearchResult(Result):
    alternatives: list[Alternative] = field(default_factory=list)
    candidates_evaluated: int = 0
    candidates_feasible: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["alternatives"] = [a.to_dict() for a in self.alternatives]
        d["candidates_evaluated"] = self.candidates_evaluated
        d["candidates_feasible"] = self.candidates_feasible
        return d
