"""What a capacity-plan run will cost — simulations, events, seconds, memory — from the parsed plan, before any
simulation starts.

A run simulates ``replications`` seeds and, when the plan lists candidates and the search is on, every purchase
option (buy nothing + each candidate) over the same seeds: ``replications x (1 + candidates + 1)`` simulations
(:func:`engine.fleet.core.simulate_replications`, :func:`engine.fleet.search.search_purchases`). One simulation
processes about two events per job (submit/start and finish) — the named jobs plus the arrival streams' expected
jobs (``rate_per_day x active days``) — and the failures of every node in service (a failure, its repair and the
interruption of the job it hit), so its time is ``events x`` a measured cost per event (scheduling, backfill scans
and the daily timeline), plus the seed-independent preparation of each option (the engine times every workload
job on every cluster). Measured on the demo plan (``engine/fleet/examples/demo_plan.json``: ~24,000 jobs and
~56,000 events a year on 2,560 nodes): 1.5-4.7 s per simulation on the shared 2-core development machine, so the
estimate takes the upper half of that range. docs/security.md "Admission".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from engine.fleet.plan import FleetCluster, Plan
from engine.schema.bounds import MAX_PLAN_EVENTS, check_work

SECONDS_PER_EVENT = 5e-5  # one scheduling event (measured: 27-84 us on the demo plan, depending on load)
SECONDS_PER_CLUSTER_DAY = 2e-5  # the daily timeline and metrics of one cluster
SECONDS_PER_WORKLOAD_OPTION = 0.15  # timing one workload job on one cluster (a layout search), per option
EVENTS_PER_JOB = 2.0
FAILURE_EVENTS_PER_NODE_DAY = 0.004  # failures, repairs and interruptions (demo: 1,729 repairs + 2,283
# interruptions over 2,560 nodes x 365 days at the catalog's rates)
BYTES_PER_JOB = 600  # a job's record and its events in the heap
BYTES_PER_CLUSTER_DAY = 400  # the daily series of the first replication (kept in full)
PLAN_BYTES_BASE = 32 * 1024**2


@dataclass(frozen=True)
class PlanEstimate:
    """The cost of one run of a plan: ``simulations`` of about ``events_per_simulation`` events each."""

    replications: int
    options: int  # purchase options simulated (1 = no search)
    simulations: int
    jobs_per_simulation: float
    events_per_simulation: float
    seconds_per_simulation: float
    seconds: float
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _node_days(clusters: tuple[FleetCluster, ...], horizon: float) -> float:
    total = 0.0
    for c in clusters:
        days = max(min(c.retire_day, horizon) - c.in_service_day, 0.0)
        total += (c.spec.gpus // max(c.gpus_per_node, 1)) * days
    return total


def estimate_plan(plan: Plan, replications: int | None = None, *, search: bool = True) -> PlanEstimate:
    """The estimate of a run of ``plan`` with ``replications`` seeds (default: the plan's) and, when ``search``
    and the plan lists candidates, the purchase search."""
    n = int(plan.replications if replications is None else replications)
    options = 1 + len(plan.candidates) if search and plan.candidates else 0
    simulations = n + n * options
    horizon = float(plan.horizon_days)
    jobs = len(plan.jobs) + sum(s.rate_per_day * max(s.end_day - s.start_day, 0.0) for s in plan.streams)
    rate = FAILURE_EVENTS_PER_NODE_DAY * plan.failures.rate_scale if plan.failures.enabled else 0.0
    biggest = max((c for c in plan.candidates), key=lambda c: c.spec.gpus, default=None)
    clusters = plan.clusters + ((biggest,) if biggest is not None and options else ())
    events = EVENTS_PER_JOB * jobs + rate * _node_days(clusters, horizon)
    per_sim = SECONDS_PER_EVENT * events + SECONDS_PER_CLUSTER_DAY * horizon * len(clusters)
    workload_jobs = sum(1 for j in plan.jobs if j.workload is not None)
    prepare = SECONDS_PER_WORKLOAD_OPTION * workload_jobs * len(clusters) * max(options, 1)
    memory = PLAN_BYTES_BASE + BYTES_PER_JOB * jobs + BYTES_PER_CLUSTER_DAY * horizon * len(clusters)
    return PlanEstimate(replications=n, options=max(options, 1), simulations=simulations, jobs_per_simulation=jobs,
                        events_per_simulation=events, seconds_per_simulation=per_sim,
                        seconds=prepare + simulations * per_sim, bytes=int(memory))


def check_plan(estimate: PlanEstimate, field: str = "replications") -> None:
    """The engine's own ceiling on one run's events (over every simulation), before it starts."""
    check_work("simulated events (jobs and failures x simulations)",
               int(estimate.events_per_simulation * estimate.simulations), MAX_PLAN_EVENTS, field,
               "lower the replications, the purchase options or the demand (rates, horizon)")
