"""The capacity-plan document: validate it strictly and turn it into frozen dataclasses.

Every error is a :class:`~engine.errors.ScenarioError` whose ``field`` is the path in the plan
(``clusters[1].in_service_day``, ``arrivals[0].gpus.weights``) and whose message gives the reason. Every count
that drives work (horizon, clusters, jobs, expected arrivals, distribution tables) is bounded here, before any
simulation starts, so that no document can stall a worker. The scenario fields of a cluster go through the one
scenario parser (:mod:`engine.document.parse`). Format: docs/fleet-model.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import CatalogItems
from engine.document import parse as scenario_mod
from engine.errors import ScenarioError
from engine.schema.bounds import check_int, check_number, check_work
from engine.schema.types import ClusterSpec

# ---------------------------------------------------------------------------------------------- bounds
MAX_HORIZON_DAYS = 3650  # ten years: longer than any GPU's depreciation life (4-6 years)
MAX_CLUSTERS = 64  # clusters (existing and purchased) in one plan
MAX_NAMED_JOBS = 5_000  # named jobs; steady demand belongs in arrival streams
MAX_STREAMS = 64  # arrival streams
MAX_EXPECTED_ARRIVALS = 200_000  # sum of rate x active days over the streams (~4 s of simulation)
MAX_TABLE = 10_000  # values of one choice / empirical distribution
MAX_PRIORITY = 1_000_000
MAX_DURATION_DAYS = 3650.0
MAX_RATE_PER_DAY = 10_000.0
MAX_BACKFILL_DEPTH = 10_000
MAX_REPAIR_DAYS = 365.0
MAX_CANDIDATES = 64  # purchase options after expanding lists (each is simulated `replications` times)
MAX_REPLICATIONS = 1_000
MAX_SEARCH_SIMULATIONS = 4_000  # purchase options x replications
DISTS = ("exponential", "lognormal", "choice", "empirical")
POLICIES = ("fifo", "priority", "backfill")
COMPONENTS = ("gpu", "hbm", "host", "software", "nic", "switch", "transceiver", "cable")

PLAN_KEYS = {"name", "description", "horizon_days", "clusters", "jobs", "arrivals", "policy", "failures", "costs",
             "candidates", "budget_usd", "confidence", "replications"}
FLEET_CLUSTER_KEYS = {"name", "in_service_day", "retire_day", "reserved_gpus", "costs"}
JOB_KEYS = {"name", "team", "gpus", "duration_days", "workload", "submit_day", "deadline_day", "priority", "cluster"}
STREAM_KEYS = {"name", "team", "rate_per_day", "gpus", "duration_days", "start_day", "end_day", "priority",
               "cluster"}
WORKLOAD_KEYS = {"model", "training", "parallelism", "name", "description"}
FAILURE_KEYS = {"rate_scale", "repair_days", "restart_min", "checkpoint_write_min", "rates"}
CANDIDATE_EXTRA = {"name", "in_service_day", "gpus", "costs"}

# Defaults of the failure model, each with its reasoning (see docs/fleet-model.md)
DEFAULT_REPAIR_DAYS = 3.0  # a node with a hardware fault: triage, swap the part (often an RMA'd GPU) and burn-in;
# Kokolis et al. 2024 (Meta RSC) report most faulty nodes return within days; 3 days is an estimate.
DEFAULT_CHECKPOINT_WRITE_MIN = 1.0  # jobs without a model (duration_days only): a 1-minute checkpoint write,
# the order of a ~70B-parameter job's 1 TB state at 2 TB/s aggregate bandwidth (Llama 3 section 3.3.1), estimate.


def plan_error(path: str, message: str) -> ScenarioError:
    return ScenarioError(path, message)


@dataclass(frozen=True)
class Dist:
    """A value or a distribution: ``kind`` const | exponential | lognormal | choice | empirical."""

    kind: str
    mean: float = 0.0
    sigma: float = 0.0
    values: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()

    @property
    def max_value(self) -> float:
        """Largest value the distribution can take (inf for unbounded ones)."""
        if self.kind == "const":
            return self.mean
        if self.kind in ("choice", "empirical"):
            return max(self.values)
        return math.inf

    @property
    def expected(self) -> float:
        if self.kind in ("const", "exponential", "lognormal"):
            return self.mean
        if self.kind == "empirical":
            return sum(self.values) / len(self.values)
        total = sum(self.weights)
        return sum(v * w for v, w in zip(self.values, self.weights, strict=True)) / total


@dataclass(frozen=True)
class FleetCluster:
    name: str
    spec: ClusterSpec
    doc: dict[str, Any]  # the scenario cluster fields (for predict and the cost model)
    in_service_day: float
    retire_day: float  # horizon when not given
    reserved_gpus: int
    costs: dict[str, Any] | None
    purchased: bool = False  # a candidate of the purchase search

    @property
    def gpus_per_node(self) -> int:
        return self.spec.gpus_per_node

    @property
    def training_gpus(self) -> int:
        """GPUs left to training after the reserved inference block, in whole nodes."""
        gpn = self.spec.gpus_per_node
        reserved_nodes = -(-self.reserved_gpus // gpn)
        return (self.spec.gpus // gpn - reserved_nodes) * gpn


@dataclass(frozen=True)
class NamedJob:
    name: str
    team: str
    gpus: int | None  # None = "auto" (workload jobs only)
    duration_days: float | None
    workload: dict[str, Any] | None
    submit_day: float
    deadline_day: float | None
    priority: int
    cluster: int | None  # pinned cluster index


@dataclass(frozen=True)
class Stream:
    name: str
    team: str
    rate_per_day: float
    gpus: Dist
    duration_days: Dist
    start_day: float
    end_day: float
    priority: int
    cluster: int | None


@dataclass(frozen=True)
class Failures:
    enabled: bool
    rate_scale: float = 1.0
    repair_days: float = DEFAULT_REPAIR_DAYS
    restart_min: float | None = None  # None = the reliability catalog's restart_min
    checkpoint_write_min: float = DEFAULT_CHECKPOINT_WRITE_MIN
    rates: dict[str, float] = field(default_factory=dict)  # component -> per unit-day override


@dataclass(frozen=True)
class Policy:
    name: str  # fifo | priority | backfill
    preemption: bool = False
    backfill_depth: int = 1_000


@dataclass(frozen=True)
class Plan:
    name: str
    horizon_days: int
    clusters: tuple[FleetCluster, ...]
    jobs: tuple[NamedJob, ...]
    streams: tuple[Stream, ...]
    policy: Policy
    failures: Failures
    costs: dict[str, Any] | None  # None = the cost model's defaults; {"enabled": false} handled by parse
    costs_enabled: bool
    candidates: tuple[FleetCluster, ...] = ()
    budget_usd: float | None = None
    confidence: float = 0.9
    replications: int = 10


# ---------------------------------------------------------------------------------------------- helpers


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise plan_error(path, f"must be an object, got {type(value).__name__}")
    return value


def _keys(doc: Mapping[str, Any], allowed: set[str], required: tuple[str, ...], path: str) -> None:
    for key in doc:
        if not isinstance(key, str) or key not in allowed:
            raise plan_error(f"{path}.{key}" if path else str(key), f"unknown key; allowed: {', '.join(sorted(allowed))}")
    for key in required:
        if key not in doc:
            raise plan_error(f"{path}.{key}" if path else key, "is required")


def _list(value: Any, path: str, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise plan_error(path, f"must be a list, got {type(value).__name__}")
    if len(value) > limit:
        raise plan_error(path, f"at most {limit:,} entries, got {len(value):,}")
    return value


def _name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise plan_error(path, "must be a non-empty string")
    if len(value) > 200:
        raise plan_error(path, "at most 200 characters")
    if "\x00" in value:
        raise plan_error(path, "must not contain NUL characters")
    return value


def _day(value: Any, path: str, horizon: int) -> float:
    return check_number(value, path, 0.0, float(horizon))


def parse_dist(value: Any, path: str, *, integer: bool, hi: float) -> Dist:
    """A number, or ``{"dist": ...}`` (exponential mean; lognormal mean, sigma; choice values, weights; empirical)."""
    if not isinstance(value, Mapping):
        if integer:
            return Dist("const", mean=float(check_int(value, path, 1, int(hi))))
        return Dist("const", mean=check_number(value, path, 0.0, hi, lo_open=True))
    kind = value.get("dist")
    if kind not in DISTS:
        raise plan_error(f"{path}.dist", f"must be one of {', '.join(DISTS)}, got {kind!r}")
    allowed = {"exponential": {"dist", "mean"}, "lognormal": {"dist", "mean", "sigma"},
               "choice": {"dist", "values", "weights"}, "empirical": {"dist", "values"}}[kind]
    required = {"exponential": ("mean",), "lognormal": ("mean", "sigma"), "choice": ("values",),
                "empirical": ("values",)}[kind]
    _keys(value, allowed, required, path)
    if kind in ("exponential", "lognormal"):
        mean = check_number(value["mean"], f"{path}.mean", 0.0, hi, lo_open=True)
        sigma = check_number(value["sigma"], f"{path}.sigma", 0.0, 5.0) if kind == "lognormal" else 0.0
        return Dist(kind, mean=mean, sigma=sigma)
    raw = _list(value["values"], f"{path}.values", MAX_TABLE)
    if not raw:
        raise plan_error(f"{path}.values", "must not be empty")
    if integer:
        vals = tuple(float(check_int(v, f"{path}.values[{i}]", 1, int(hi))) for i, v in enumerate(raw))
    else:
        vals = tuple(check_number(v, f"{path}.values[{i}]", 0.0, hi, lo_open=True) for i, v in enumerate(raw))
    weights: tuple[float, ...] = ()
    if kind == "choice":
        wr = value.get("weights")
        if wr is None:
            weights = tuple(1.0 for _ in vals)
        else:
            wl = _list(wr, f"{path}.weights", MAX_TABLE)
            if len(wl) != len(vals):
                raise plan_error(f"{path}.weights", f"must have one weight per value ({len(vals)}), got {len(wl)}")
            weights = tuple(check_number(w, f"{path}.weights[{i}]", 0.0, 1e9) for i, w in enumerate(wl))
            if sum(weights) <= 0:
                raise plan_error(f"{path}.weights", "must not all be zero")
    return Dist(kind, values=vals, weights=weights)


def _parse_cluster_fields(doc: Mapping[str, Any], costs: Mapping[str, Any] | None, path: str,
                          catalog: CatalogItems | None) -> ClusterSpec:
    """The scenario parser's cluster section, with its error paths moved under ``path``."""
    parse = getattr(scenario_mod, "parse_cluster", None)
    try:
        if parse is not None:
            spec: ClusterSpec = parse(doc, catalog, costs)
        else:  # pragma: no cover - older scenario module
            spec = scenario_mod._parse_cluster(doc, catalog)  # type: ignore[attr-defined]
    except ScenarioError as exc:
        sub = exc.field[len("cluster"):] if exc.field.startswith("cluster") else f".{exc.field}"
        raise plan_error(f"{path}{sub}", exc.message) from exc
    return spec


def parse_fleet_cluster(doc: Any, path: str, horizon: int, catalog: CatalogItems | None, *,
                        purchased: bool = False) -> FleetCluster:
    d = _mapping(doc, path)
    name = _name(d.get("name"), f"{path}.name")
    scen = {k: v for k, v in d.items() if k not in FLEET_CLUSTER_KEYS}
    costs = d.get("costs")
    if costs is not None and not isinstance(costs, Mapping):
        raise plan_error(f"{path}.costs", "must be an object (the scenario's costs section)")
    spec = _parse_cluster_fields(scen, costs, path, catalog)
    in_service = _day(d.get("in_service_day", 0), f"{path}.in_service_day", horizon)
    retire_raw = d.get("retire_day")
    retire = float(horizon) if retire_raw is None else _day(retire_raw, f"{path}.retire_day", horizon)
    if retire <= in_service and retire_raw is not None:
        raise plan_error(f"{path}.retire_day", f"must be after in_service_day={in_service:g}, got {retire:g}")
    reserved = check_int(d.get("reserved_gpus", 0), f"{path}.reserved_gpus", 0, spec.gpus)
    fc = FleetCluster(name, spec, dict(scen), in_service, retire, reserved,
                      dict(costs) if costs is not None else None, purchased)
    if fc.training_gpus <= 0:
        raise plan_error(f"{path}.reserved_gpus", f"leaves no whole node for training ({spec.gpus} GPUs)")
    return fc


def _cluster_ref(value: Any, path: str, names: dict[str, int]) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in names:
        raise plan_error(path, f"must name one of the plan's clusters ({', '.join(names)}), got {value!r}")
    return names[value]


def _parse_job(doc: Any, path: str, horizon: int, names: dict[str, int]) -> NamedJob:
    d = _mapping(doc, path)
    _keys(d, JOB_KEYS, ("name", "submit_day"), path)
    name = _name(d["name"], f"{path}.name")
    team = _name(d.get("team", "default"), f"{path}.team")
    has_w, has_d = "workload" in d, "duration_days" in d
    if has_w == has_d:
        raise plan_error(path, "give exactly one of duration_days or workload")
    raw_gpus = d.get("gpus", "auto" if has_w else None)
    gpus: int | None
    if raw_gpus == "auto":
        if not has_w:
            raise plan_error(f"{path}.gpus", '"auto" needs a workload (its run time decides the size)')
        gpus = None
    else:
        gpus = check_int(raw_gpus, f"{path}.gpus", 1, 1 << 20)
    duration = check_number(d["duration_days"], f"{path}.duration_days", 0.0, MAX_DURATION_DAYS,
                            lo_open=True) if has_d else None
    workload: dict[str, Any] | None = None
    if has_w:
        w = _mapping(d["workload"], f"{path}.workload")
        _keys(w, WORKLOAD_KEYS, ("model", "training"), f"{path}.workload")
        workload = dict(w)
        workload.setdefault("parallelism", "auto")
    submit = _day(d["submit_day"], f"{path}.submit_day", horizon)
    deadline = None
    if d.get("deadline_day") is not None:
        deadline = check_number(d["deadline_day"], f"{path}.deadline_day", 0.0, 10.0 * MAX_HORIZON_DAYS)
        if deadline <= submit:
            raise plan_error(f"{path}.deadline_day", f"must be after submit_day={submit:g}, got {deadline:g}")
    if gpus is None and deadline is None:
        raise plan_error(f"{path}.deadline_day", 'is required when gpus is "auto" (the smallest size that meets '
                         "it is chosen)")
    priority = check_int(d.get("priority", 0), f"{path}.priority", -MAX_PRIORITY, MAX_PRIORITY)
    return NamedJob(name, team, gpus, duration, workload, submit, deadline, priority,
                    _cluster_ref(d.get("cluster"), f"{path}.cluster", names))


def _parse_stream(doc: Any, path: str, horizon: int, names: dict[str, int], max_gpus: int) -> Stream:
    d = _mapping(doc, path)
    _keys(d, STREAM_KEYS, ("name", "rate_per_day", "gpus", "duration_days"), path)
    name = _name(d["name"], f"{path}.name")
    team = _name(d.get("team", name), f"{path}.team")
    rate = check_number(d["rate_per_day"], f"{path}.rate_per_day", 0.0, MAX_RATE_PER_DAY)
    gpus = parse_dist(d["gpus"], f"{path}.gpus", integer=True, hi=float(1 << 20))
    if gpus.max_value != math.inf and gpus.max_value > max_gpus:
        raise plan_error(f"{path}.gpus", f"{gpus.max_value:g} GPUs exceeds the largest cluster ({max_gpus} GPUs "
                         "for training)")
    duration = parse_dist(d["duration_days"], f"{path}.duration_days", integer=False, hi=MAX_DURATION_DAYS)
    start = _day(d.get("start_day", 0), f"{path}.start_day", horizon)
    end = _day(d.get("end_day", horizon), f"{path}.end_day", horizon)
    if end < start:
        raise plan_error(f"{path}.end_day", f"must be >= start_day={start:g}, got {end:g}")
    priority = check_int(d.get("priority", 0), f"{path}.priority", -MAX_PRIORITY, MAX_PRIORITY)
    return Stream(name, team, rate, gpus, duration, start, end, priority,
                  _cluster_ref(d.get("cluster"), f"{path}.cluster", names))


def _parse_policy(value: Any) -> Policy:
    if value is None:
        return Policy("fifo")
    if isinstance(value, str):
        if value not in POLICIES:
            raise plan_error("policy", f"must be one of {', '.join(POLICIES)}, got {value!r}")
        return Policy(value)
    d = _mapping(value, "policy")
    _keys(d, {"name", "preemption", "backfill_depth"}, ("name",), "policy")
    name = d["name"]
    if name not in POLICIES:
        raise plan_error("policy.name", f"must be one of {', '.join(POLICIES)}, got {name!r}")
    pre = d.get("preemption", False)
    if not isinstance(pre, bool):
        raise plan_error("policy.preemption", f"must be true or false, got {pre!r}")
    if pre and name != "priority":
        raise plan_error("policy.preemption", "applies to the priority policy only")
    depth = check_int(d.get("backfill_depth", 1_000), "policy.backfill_depth", 1, MAX_BACKFILL_DEPTH)
    return Policy(name, pre, depth)


def _parse_failures(value: Any) -> Failures:
    if value is None or value is True:
        return Failures(True)
    if value is False:
        return Failures(False)
    d = _mapping(value, "failures")
    _keys(d, FAILURE_KEYS, (), "failures")
    rates: dict[str, float] = {}
    if d.get("rates") is not None:
        r = _mapping(d["rates"], "failures.rates")
        for k, v in r.items():
            if k not in COMPONENTS:
                raise plan_error(f"failures.rates.{k}", f"unknown component; allowed: {', '.join(COMPONENTS)}")
            rates[k] = check_number(v, f"failures.rates.{k}", 0.0, 1.0)
    restart = d.get("restart_min")
    return Failures(
        True,
        rate_scale=check_number(d.get("rate_scale", 1.0), "failures.rate_scale", 0.0, 1000.0),
        repair_days=check_number(d.get("repair_days", DEFAULT_REPAIR_DAYS), "failures.repair_days", 0.0,
                                 MAX_REPAIR_DAYS),
        restart_min=None if restart is None else check_number(restart, "failures.restart_min", 0.0, 10_000.0),
        checkpoint_write_min=check_number(d.get("checkpoint_write_min", DEFAULT_CHECKPOINT_WRITE_MIN),
                                          "failures.checkpoint_write_min", 0.0, 10_000.0),
        rates=rates,
    )


def _expand_candidates(raw: Any, horizon: int, catalog: CatalogItems | None, taken: set[str]) -> list[FleetCluster]:
    """Each candidate may list several ``gpus`` sizes and ``in_service_day`` deliveries: one option per pair."""
    out: list[FleetCluster] = []
    for i, c in enumerate(_list(raw, "candidates", MAX_CANDIDATES)):
        path = f"candidates[{i}]"
        d = _mapping(c, path)
        sizes = d.get("gpus")
        days = d.get("in_service_day", 0)
        size_list = sizes if isinstance(sizes, list) else [sizes]
        day_list = days if isinstance(days, list) else [days]
        check_work("purchase options", len(out) + len(size_list) * len(day_list), MAX_CANDIDATES, path,
                   "list fewer sizes or delivery days")
        base = _name(d.get("name"), f"{path}.name")
        for j, size in enumerate(size_list):
            for k, day in enumerate(day_list):
                doc = dict(d)
                doc["gpus"] = size
                doc["in_service_day"] = day
                label = base if len(size_list) * len(day_list) == 1 else f"{base} {size} GPUs day {day}"
                doc["name"] = label
                sub = path if len(size_list) * len(day_list) == 1 else f"{path}[{j},{k}]"
                fc = parse_fleet_cluster(doc, sub, horizon, catalog, purchased=True)
                if fc.name in taken:
                    raise plan_error(f"{path}.name", f"duplicate cluster name {fc.name!r}")
                taken.add(fc.name)
                out.append(fc)
    return out


def parse_plan(doc: Any, catalog: CatalogItems | None = None) -> Plan:
    """Validate a plan document (see docs/fleet-model.md); raises ScenarioError naming the field."""
    d = _mapping(doc, "plan")
    _keys(d, PLAN_KEYS, ("horizon_days", "clusters"), "")
    name = d.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        raise plan_error("name", "must be a string of at most 200 characters")
    horizon = check_int(d["horizon_days"], "horizon_days", 1, MAX_HORIZON_DAYS)
    clusters: list[FleetCluster] = []
    names: dict[str, int] = {}
    for i, c in enumerate(_list(d["clusters"], "clusters", MAX_CLUSTERS)):
        fc = parse_fleet_cluster(c, f"clusters[{i}]", horizon, catalog)
        if fc.name in names:
            raise plan_error(f"clusters[{i}].name", f"duplicate cluster name {fc.name!r}")
        names[fc.name] = i
        clusters.append(fc)
    taken = set(names)
    candidates = _expand_candidates(d["candidates"], horizon, catalog, taken) if d.get("candidates") else []
    if not clusters and not candidates:
        raise plan_error("clusters", "must list at least one cluster (or candidates to buy)")
    max_gpus = max(c.training_gpus for c in [*clusters, *candidates])
    jobs = tuple(_parse_job(j, f"jobs[{i}]", horizon, names)
                 for i, j in enumerate(_list(d.get("jobs", []), "jobs", MAX_NAMED_JOBS)))
    seen: set[str] = set()
    for i, j in enumerate(jobs):
        if j.name in seen:
            raise plan_error(f"jobs[{i}].name", f"duplicate job name {j.name!r}")
        seen.add(j.name)
        if j.gpus is not None and j.gpus > max_gpus:
            raise plan_error(f"jobs[{i}].gpus", f"{j.gpus} exceeds the largest cluster ({max_gpus} GPUs for training)")
    streams = tuple(_parse_stream(s, f"arrivals[{i}]", horizon, names, max_gpus)
                    for i, s in enumerate(_list(d.get("arrivals", []), "arrivals", MAX_STREAMS)))
    expected = sum(s.rate_per_day * (s.end_day - s.start_day) for s in streams)
    check_work("expected arrivals (rate_per_day x active days)", int(expected), MAX_EXPECTED_ARRIVALS, "arrivals",
               "lower the rates or the horizon")
    costs_raw = d.get("costs")
    costs_enabled = costs_raw is not False
    if costs_raw is not None and costs_raw is not False and not isinstance(costs_raw, Mapping):
        raise plan_error("costs", "must be an object (the scenario's costs section) or false")
    budget = d.get("budget_usd")
    replications = check_int(d.get("replications", 10), "replications", 1, MAX_REPLICATIONS)
    check_work("purchase simulations (options x replications)", (len(candidates) + 1) * replications,
               MAX_SEARCH_SIMULATIONS, "replications")
    return Plan(
        name=name,
        horizon_days=horizon,
        clusters=tuple(clusters),
        jobs=jobs,
        streams=streams,
        policy=_parse_policy(d.get("policy")),
        failures=_parse_failures(d.get("failures")),
        costs=dict(costs_raw) if isinstance(costs_raw, Mapping) else None,
        costs_enabled=costs_enabled,
        candidates=tuple(candidates),
        budget_usd=None if budget is None else check_number(budget, "budget_usd", 0.0, 1e12),
        confidence=check_number(d.get("confidence", 0.9), "confidence", 0.0, 1.0, lo_open=True),
        replications=replications,
    )
