"""What ``predict`` and ``search`` return: one layout's figures (:class:`Result`), a losing alternative and
the search's winner with its alternatives. Times in seconds, rates per second, memory in GB (1e9 bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# throughput figures that are null (None) in ``Result.to_dict()`` when the layout does not fit in memory
NULL_WHEN_UNFIT = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                   "hardware_tflops_per_gpu", "mfu", "hfu", "time_to_train_days", "gpu_hours",
                   "network_wait_fraction")


@dataclass
class Result:
    """Prediction for one layout. Times in seconds, rates per second, memory in GB (1e9 bytes).

    When ``fits`` is false the float attributes hold what the layout would reach with unlimited memory
    (for diagnostics and ranking only); ``to_dict()`` reports them as null (``NULL_WHEN_UNFIT``).
    """

    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    hfu: float
    memory_gb_per_gpu: float
    memory_limit_gb: float
    fits: bool
    time_to_train_days: float
    gpu_hours: float
    network_wait_fraction: float
    breakdown_s: dict[str, float]
    parallelism: dict[str, Any]
    gpu: str = ""
    gpus: int = 0
    precision: str = "bf16"
    notes: list[str] = field(default_factory=list)
    fabric: dict[str, Any] = field(default_factory=dict)  # the cluster assumed (topology.fabric_block)
    # where the routing share came from: {"kind": "shipped", "table": ...} or {"kind": "study", "share": ...,
    # "study": {run, name, ...}} for a fabric study pinned to the scenario (pinned_study.py, issue #13)
    routing_source: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = self._raw_dict()
        if not self.fits:
            # a layout that does not fit has no throughput: the figures are null, never shown as a result
            for key in NULL_WHEN_UNFIT:
                d[key] = None
        return d

    def _raw_dict(self) -> dict[str, Any]:
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
            "breakdown_s": dict(self.breakdown_s),
            "parallelism": dict(self.parallelism),
            "gpu": self.gpu,
            "gpus": self.gpus,
            "precision": self.precision,
            "notes": list(self.notes),
            "fabric": dict(self.fabric),
            "routing_source": dict(self.routing_source),
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
