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


#: Scenario inputs that carry a range (Monte Carlo, the sensitivity tornado), in the words the portal shows.
#: ``costs.prices.<catalog key>`` reads "<key> unit price"; anything else falls back to its path in words.
INPUTS: dict[str, str] = {
    "costs.usd_per_kwh": "Electricity price ($/kWh)",
    "costs.pue": "PUE",
    "costs.depreciation_years": "Depreciation period (years)",
    "costs.colocation_usd_per_kw_month": "Colocation ($/kW-month)",
    "costs.construction_usd_per_mw": "Construction ($/MW)",
    "costs.avg_utilization": "Server power draw (share of max)",
    "costs.goodput.restart_min": "Restart after a failure (min)",
    "costs.goodput.failure_rate_scale": "Failure rate (× catalog)",
    "cluster.nic_gbps": "Link speed per GPU (Gb/s)",
    "cluster.oversubscription": "Oversubscription",
    "cluster.gpus": "GPUs",
    "training.tokens": "Training tokens",
    "training.global_batch": "Global batch",
}
_INPUT_SECTIONS = ("costs.", "cluster.", "training.", "model.")


def input_label(path: str) -> str:
    """A ranged scenario input in words: ``costs.prices.HGX-H100`` → ``HGX-H100 unit price``,
    ``costs.usd_per_kwh`` → ``Electricity price ($/kWh)``; an input this table does not name: its path in words."""
    if path in INPUTS:
        return INPUTS[path]
    if path.startswith("costs.prices.") and len(path) > len("costs.prices."):
        return f"{path.removeprefix('costs.prices.')} unit price"
    rest = next((path.removeprefix(s) for s in _INPUT_SECTIONS if path.startswith(s)), path)
    text = " · ".join(_words(p) for p in rest.split(".") if p)
    return text[:1].upper() + text[1:]


# --- kinds: how a figure is rounded in exports and how it moves in a comparison (issue #24) -------------------
#: An amount of money (capex, $ per year, $ per run): exact cents in every export and on the page.
MONEY = "money"
#: Money per unit ($ per GPU-hour, per million tokens, per kWh): full precision (a price is never rounded to cents).
PRICE = "price"
#: A share of something (MFU, network wait, a share of TCO): moves in percentage points.
SHARE = "share"
#: Everything else (seconds, days, GPUs, counts, ratios): full precision; moves in percent.
AMOUNT = "amount"
KINDS = (MONEY, PRICE, SHARE, AMOUNT)
#: The unit a comparison states a change in, per kind: points for shares, percent of the baseline otherwise.
CHANGE_UNITS = {SHARE: "pt", MONEY: "%", PRICE: "%", AMOUNT: "%"}


def unit_kind(unit_: str) -> str:
    """The kind of a figure from its unit: ``USD`` / ``USD/yr`` money, other ``USD/...`` prices, ``fraction``
    shares, anything else an amount."""
    if unit_ in ("USD", "USD/yr"):
        return MONEY
    if unit_.startswith("USD/"):
        return PRICE
    if unit_ == "fraction":
        return SHARE
    return AMOUNT


_FORMAT_OF_UNIT = {"USD": "usd", "USD/yr": "usd", "fraction": "pct", "s": "s", "days": "days", "GB": "gb",
                   "USD/GPU-h": "usd2", "USD/Mtok": "usd4", "kW": "kw"}
#: result sections that name the figure's family in a label ("Fabric · switches · leaf"); performance and tco
#: figures need no family
_SECTIONS = {"fabric": "Fabric", "goodput": "Goodput", "monte_carlo": "Monte Carlo", "summary": "",
             "performance": "", "tco": "", "efficiency": "Fabric efficiency"}
_BAND_SUFFIXES = {"p10": "P10", "p50": "P50", "p90": "P90", "mean": "mean", "max": "max", "p99": "P99"}
# (suffix of a path part, unit, words dropped from the label): the first that matches, leaf first, wins
_UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("usd_per_gpu_hour", "USD/GPU-h"), ("usd_per_million_tokens", "USD/Mtok"), ("usd_per_kwh", "USD/kWh"),
    ("_per_gpu_usd", "USD/GPU"), ("usd_per_year", "USD/yr"), ("annual_usd", "USD/yr"),
    ("annual_by_category_usd", "USD/yr"), ("annual_tco_usd", "USD/yr"), ("annual_opex_usd", "USD/yr"),
    ("_usd", "USD"), ("_fraction", "fraction"), ("_share", "fraction"), ("mfu", "fraction"), ("hfu", "fraction"),
    ("tokens_per_s_per_gpu", "tokens/s/GPU"), ("tokens_per_s", "tokens/s"), ("tflops_per_gpu", "TFLOP/s/GPU"),
    ("_per_day", "per day"), ("gpu_hours", "GPU-h"), ("_days", "days"), ("_day", "day"), ("_s", "s"),
    ("_min", "min"), ("_h", "h"), ("_gb", "GB"), ("_kw", "kW"), ("_gbps", "Gb/s"), ("_w", "W"),
    ("days_p90", "days"), ("days_mean", "days"), ("utilization", "fraction"), ("oversubscription", "ratio"), ("gpus", "GPUs"), ("fits", "yes = 1"),
    ("in_network_reduction", "yes = 1"), ("sequence_parallel", "yes = 1"),
)
_ACRONYMS = {"gpu": "GPU", "gpus": "GPUs", "nic": "NIC", "nics": "NICs", "tco": "TCO", "mfu": "MFU", "hfu": "HFU",
             "tflops": "TFLOPS", "tp": "TP", "pp": "PP", "dp": "DP", "cp": "CP", "ep": "EP", "vpp": "VPP",
             "hbm": "HBM", "mtti": "MTTI", "capex": "capex", "opex": "opex"}
_UNIT_WORDS = ("usd", "s", "min", "h", "gb", "kw", "w", "gbps", "days")


def _unit_of(parts: list[str]) -> str:
    for part in reversed(parts):
        low = part.lower()
        if "share_of" in low or low.startswith("share"):
            return "fraction"
        for suffix, unit_ in _UNIT_SUFFIXES:
            if low == suffix.lstrip("_") or low.endswith(suffix):
                return unit_
    return "count"


def _words(part: str) -> str:
    words = part.split("_")
    while len(words) > 1 and words[-1] in _UNIT_WORDS:
        words.pop()
    return " ".join(_ACRONYMS.get(w, w) for w in words)


def describe(path: str) -> Metric:
    """The registry's metric for ``path``, or, for a figure it does not name, one inferred from the path: a label
    in words (``Fabric · switches · leaf``, ``Annual TCO (Monte Carlo P90)``), a unit from the name's suffix
    (``_usd`` USD, ``_fraction`` fraction, ``_s`` s, ``_days`` days, counts otherwise) and the format that goes
    with it. Every figure of a comparison or an export has a human label and a unit."""
    known = get(path)
    if known is not None:
        return known
    parts = path.split(".")
    if len(parts) > 1 and parts[-1] in _BAND_SUFFIXES:  # a band of a figure: the figure's label and unit
        base_path = ".".join(parts[:-1])
        section = parts[0] if parts[0] in ("monte_carlo", "summary") and len(parts) > 2 else ""
        inner = ".".join(parts[1:-1]) if section else base_path
        base = next((m for m in (get(inner), get(f"tco.{inner}"), get(f"performance.{inner}"),
                                 get(f"{base_path}.p50")) if m is not None), None) or describe(
            inner if section else base_path)
        band_ = _BAND_SUFFIXES[parts[-1]]
        label_ = f"{base.label} ({'Monte Carlo ' if section == 'monte_carlo' else ''}{band_})"
        return Metric(path, label_, base.unit, base.lower_is_better, base.format)
    family = _SECTIONS.get(parts[0])
    rest = parts[1:] if family is not None else parts
    words = [_words(p) for p in rest] or [_words(parts[0])]
    text = " · ".join(w for w in words if w)
    text = text[:1].upper() + text[1:]
    label_ = f"{family} · {text}" if family else text
    unit_ = _unit_of(parts)
    return Metric(path, label_, unit_, None, _FORMAT_OF_UNIT.get(unit_, "num"))


def kind(path: str) -> str:
    """``money``, ``price``, ``share`` or ``amount`` (see :data:`KINDS`)."""
    return unit_kind(describe(path).unit)


def change_unit(path: str) -> str:
    """``pt`` for a share (MFU 40% -> 42% is +2.0 pt), ``%`` (of the baseline) for everything else."""
    return CHANGE_UNITS[kind(path)]


def change(path: str, before: float | None, after: float | None) -> float | None:
    """The one definition of a change between two runs, used by the API, the exports and the portal alike:
    percentage points for a share (``(after - before) x 100``), percent of the baseline for anything else
    (None when the baseline is 0 or either value is missing)."""
    if before is None or after is None:
        return None
    if kind(path) == SHARE:
        return (after - before) * 100.0
    if before == 0:
        return None
    return (after - before) / abs(before) * 100.0
