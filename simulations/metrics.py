"""The metric registry: every figure a run produces that people compare, in one table.

Reports and exports (order, labels, units), the portal's headline cards and charts, the live preview,
sweep rows and their "best", and re-evaluation diffs all read this table, so a metric is named, ordered and
judged (lower or higher is better) the same way everywhere.

``path`` is where the figure lives in a TCO result. Performance figures sit under ``performance.`` in a TCO
result and at the top level of a predict/search result; :func:`value` finds either, so a TCO sweep records
its step time, MFU and time to train like a predict sweep does. ``key`` is the short name used in sweep
summaries and previews (``performance.`` dropped).

Formats are the portal's ``fmt`` kinds: ``s``, ``pct`` (a fraction shown as %), ``num``, ``days``, ``usd``,
``usd2``, ``usd4``, ``gb``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PERFORMANCE = "performance."


@dataclass(frozen=True)
class Metric:
    path: str
    label: str
    unit: str
    lower_is_better: bool | None  # None: neither (a share that is informative, not a goal)
    format: str
    headline: bool = False  # a headline card / comparison row on the portal
    sweep: bool = False  # recorded in every sweep row
    best: bool = False  # a sweep names its best run by this metric
    preview: bool = False  # in the live estimate
    reevaluation: str = ""  # short label in a re-evaluation summary line ("TCO +3.1%"); empty = not there
    plan: bool = False  # a capacity-plan (fleet run) figure: plan comparisons and plan re-evaluation diffs

    @property
    def key(self) -> str:
        """The short name: ``step_time_s`` for ``performance.step_time_s``, else the path itself."""
        return self.path.removeprefix(PERFORMANCE)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the figure may be stored under (TCO result first, then predict/search)."""
        return (self.path, self.key) if self.key != self.path else (self.path,)


METRICS: tuple[Metric, ...] = (
    Metric("performance.step_time_s", "Step time", "s", True, "s",
           headline=True, sweep=True, best=True, preview=True, reevaluation="step time"),
    Metric("performance.tokens_per_s", "Tokens / s", "tokens/s", False, "num", headline=True, sweep=True, preview=True),
    Metric("performance.mfu", "MFU", "fraction", False, "pct", headline=True, sweep=True, best=True, preview=True),
    Metric("performance.hfu", "HFU", "fraction", False, "pct", preview=True),
    Metric("performance.time_to_train_days", "Time to train", "days", True, "days",
           headline=True, sweep=True, best=True, preview=True, reevaluation="time to train"),
    Metric("performance.gpu_hours", "GPU-hours", "GPU-h", True, "num", preview=True),
    Metric("performance.network_wait_fraction", "Network wait", "fraction", True, "pct",
           headline=True, sweep=True, preview=True),
    Metric("performance.memory_gb_per_gpu", "Memory per GPU", "GB", True, "gb", preview=True),
    Metric("tco.run_days", "Wall-clock run (with failures)", "days", True, "days", headline=True),
    Metric("tco.run_cost_usd", "$ per run", "USD", True, "usd", headline=True, sweep=True, preview=True),
    Metric("tco.usd_per_million_tokens", "$ per million tokens", "USD/Mtok", True, "usd4",
           headline=True, sweep=True, best=True, preview=True, reevaluation="$/Mtok"),
    Metric("tco.usd_per_gpu_hour", "$ per GPU-hour", "USD/GPU-h", True, "usd2", headline=True, sweep=True, preview=True),
    Metric("tco.capex_usd", "Capex", "USD", True, "usd", headline=True, sweep=True, preview=True),
    Metric("tco.network_capex_usd", "Network capex", "USD", True, "usd", headline=True),
    Metric("tco.network_share_of_capex", "Network share of capex", "fraction", None, "pct", headline=True),
    Metric("tco.annual_tco_usd", "Annual TCO", "USD/yr", True, "usd",
           headline=True, sweep=True, preview=True, reevaluation="TCO"),
    Metric("tco.network_share_of_tco", "Network share of TCO", "fraction", None, "pct", headline=True),
    Metric("tco.stranded_usd_per_year", "Stranded $/yr (network wait)", "USD/yr", True, "usd", headline=True),
    Metric("goodput.effective_training_fraction", "Goodput", "fraction", False, "pct", headline=True),
    Metric("fabric.switches.total", "Switches", "count", True, "num", headline=True),
    # fabric studies (flow-level simulation): achieved / ideal collective throughput across seeds
    Metric("efficiency.p10", "Fabric efficiency p10", "fraction", False, "pct", sweep=True),
    Metric("efficiency.p50", "Fabric efficiency p50", "fraction", False, "pct", sweep=True, best=True),
    Metric("efficiency.p90", "Fabric efficiency p90", "fraction", False, "pct", sweep=True),
    # capacity plans (fleet simulation, issue #14): the P50 over replications of each headline figure
    Metric("summary.utilization.p50", "Utilization (allocated)", "fraction", False, "pct", plan=True,
           reevaluation="utilization"),
    Metric("summary.productive_utilization.p50", "Productive utilization", "fraction", False, "pct", plan=True),
    Metric("summary.first_shortfall_day.p50", "First shortfall day", "day", False, "num", plan=True,
           reevaluation="first shortfall"),
    Metric("summary.deadlines_missed.p50", "Deadlines missed", "jobs", True, "num", plan=True,
           reevaluation="deadlines missed"),
    Metric("summary.jobs_completed.p50", "Jobs completed", "jobs", False, "num", plan=True),
    Metric("summary.wait_days_mean.p50", "Mean queue wait", "days", True, "days", plan=True),
    Metric("summary.lost_to_failures_fraction.p50", "Lost to failures", "fraction", True, "pct", plan=True),
    Metric("summary.fragmented_fraction.p50", "Fragmented", "fraction", True, "pct", plan=True),
    Metric("summary.usd_per_delivered_gpu_hour.p50", "$ per delivered GPU-hour", "USD/GPU-h", True, "usd2",
           plan=True, reevaluation="$/delivered GPU-h"),
)

_BY_PATH: dict[str, Metric] = {p: m for m in METRICS for p in m.paths}

#: The step-time breakdown (``breakdown_s`` of a predict result, ``performance.breakdown_s`` of a TCO result: the
#: keys of ``engine.performance.model.BREAKDOWN_KEYS``), in the words the portal's bars, charts and reports use.
#: tests/simulations/test_metrics.py checks that every engine key has one.
BREAKDOWN: tuple[tuple[str, str], ...] = (
    ("compute", "Compute"),
    ("tp_comm", "TP comm"),
    ("cp_comm", "CP comm"),
    ("ep_comm", "EP comm"),
    ("pp_comm", "PP comm"),
    ("pp_bubble", "Pipeline bubble"),
    ("dp_comm_exposed", "DP comm (exposed)"),
    ("optimizer", "Optimizer"),
    ("stragglers", "Stragglers"),
)
_BREAKDOWN_LABELS = dict(BREAKDOWN)

HEADLINE: tuple[Metric, ...] = tuple(m for m in METRICS if m.headline)
SWEEP: tuple[Metric, ...] = tuple(m for m in METRICS if m.sweep)
BEST: tuple[Metric, ...] = tuple(m for m in METRICS if m.best)
PREVIEW: tuple[Metric, ...] = tuple(m for m in METRICS if m.preview)
PLAN: tuple[Metric, ...] = tuple(m for m in METRICS if m.plan)
# A re-evaluation's one-line summary names money first, then time: "TCO +3.1%, $/Mtok +3.0%, step time -1.2%".
REEVALUATION: tuple[Metric, ...] = tuple(
    _BY_PATH[p] for p in ("tco.annual_tco_usd", "tco.usd_per_million_tokens", "performance.step_time_s",
                          "performance.time_to_train_days")
)


def get(path: str) -> Metric | None:
    """The metric stored at ``path`` (either of its paths), or None for a figure the registry does not name."""
    return _BY_PATH.get(path)


def dig(node: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def value(result: Mapping[str, Any] | None, metric: Metric | str) -> float | None:
    """The metric's number in a stored run result (TCO, predict or search), None when absent."""
    m = get(metric) if isinstance(metric, str) else metric
    paths = m.paths if m is not None else (str(metric),)
    for path in paths:
        number = _number(dig(result or {}, path))
        if number is not None:
            return number
    return None


def values(result: Mapping[str, Any] | None, metrics: Iterable[Metric]) -> dict[str, float]:
    """``{metric.key: number}`` for the metrics present in ``result``."""
    out = {}
    for m in metrics:
        number = value(result, m)
        if number is not None:
            out[m.key] = number
    return out


def ordered(names: Iterable[str]) -> list[str]:
    """Result paths in registry order first (headline figures up front), then the rest alphabetically."""
    names = set(names)
    head = [p for m in METRICS for p in m.paths if p in names]
    return head + sorted(names - set(head))


def label(path: str) -> str:
    m = get(path)
    return m.label if m is not None else path


def unit(path: str) -> str:
    m = get(path)
    return m.unit if m is not None else ""


def display_format(path: str) -> str:
    m = get(path)
    return m.format if m is not None else "num"


def lower_is_better(path: str) -> bool | None:
    m = get(path)
    return m.lower_is_better if m is not None else None


def breakdown_label(key: str) -> str:
    """The label of a step-time breakdown key (a key the registry does not know: its words, capitalised)."""
    return _BREAKDOWN_LABELS.get(key) or key.replace("_", " ").capitalize()
