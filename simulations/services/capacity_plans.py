"""Submitting capacity-plan runs (issue #14), fanning replications out over the workers, finding a plan's runs.

A run of a plan snapshots the plan document and the default catalog's values, like a scenario run, and is
deduplicated the same way (identical queued/running/stored run of the team is returned, ``reused``). The
snapshot names the plan (``input_snapshot.capacity_plan``), which is how a plan finds its runs.

Admission (issue #23): a run's (or each replication child's) simulations — horizon x jobs x replications x purchase
options — are estimated from the parsed plan (:func:`engine.fleet.estimate.estimate_plan`) and refused with a 400
naming the setting to lower (``params.replications``, ``document.replications``, ``chunk``, ``document.horizon_days``)
when they cannot finish inside ``FP_RUN_BUDGET_S``; replication fan-outs share the sweeps' child limit, team share
and de-duplication (:func:`simulations.services.sweeps.submit_children`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

from core.errors import ValidationError, engine_error
from engine.errors import ScenarioError
from engine.fleet.estimate import PlanEstimate, check_plan, estimate_plan
from engine.fleet.metrics import summarize_compact
from engine.fleet.plan import MAX_REPLICATIONS, Plan, parse_plan
from engine.schema.bounds import check_estimate
from planning.models import CapacityPlan, Fleet
from planning.services.capacity_plans import capacity_plan_resolve
from planning.services.catalogs import catalog_resolve
from simulations import limits
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun, Sweep
from simulations.services import dispatch
from simulations.services.hashing import input_hash
from simulations.services.params import clean_params
from simulations.services.runs import run_build, run_create, submit_once
from simulations.services.sweeps import (
    check_child_count,
    clean_idempotency_key,
    find_submitted,
    submit_children,
)


def plan_runs(plan: CapacityPlan) -> QuerySet[SimulationRun]:
    """Runs of ``plan`` (newest first)."""
    return SimulationRun.objects.filter(team_id=plan.team_id, kind=RunKind.FLEET,
                                        input_snapshot__capacity_plan__id=plan.pk).order_by("-queued_at", "-pk")


def plan_snapshot(plan: CapacityPlan) -> dict[str, Any]:
    """What a run records about its plan: id, name, and each linked fleet as it was (for re-evaluation)."""
    fleets = Fleet.objects.filter(team_id=plan.team_id, pk__in=list((plan.cluster_fleets or {}).values()))
    return {"id": plan.pk, "name": plan.name,
            "fleets": {str(f.pk): {"name": f.name, "updated_at": f.updated_at.isoformat()} for f in fleets}}


def _parsed(document: Mapping[str, Any], values: Mapping[str, Any]) -> Plan:
    try:
        return parse_plan(document, values)
    except ScenarioError as exc:
        raise engine_error(exc, f"document.{exc.field}") from None


def _largest_fitting(plan: Plan, replications: int, search: bool, budget: float) -> int:
    """The most replications (at most ``replications``) whose estimate fits ``budget`` (0 when not even one)."""
    one = estimate_plan(plan, 1, search=search)
    per_replication = one.seconds_per_simulation * one.simulations
    fixed = one.seconds - per_replication
    return min(replications, max(0, int((budget - fixed) // per_replication))) if per_replication > 0 else replications


def plan_admit(*, plan: Plan, replications: int, search: bool, field: str) -> PlanEstimate:
    """Refuse (400 naming ``field`` — the replications setting of the request — or the plan's horizon) a run whose
    estimated simulations cannot finish inside ``FP_RUN_BUDGET_S`` or fit ``FP_RUN_MAX_MEMORY_MB``."""
    estimate = estimate_plan(plan, replications, search=search)
    budget = limits.run_budget_s()
    shape = (f"{replications} replication{'s' if replications != 1 else ''}"
             + (f" x {estimate.options} purchase options" if estimate.options > 1 else "")
             + f" = {estimate.simulations:,} simulations of about {estimate.events_per_simulation:,.0f} events")
    try:
        check_plan(estimate, field)
        check_estimate(f"memory ({shape})", estimate.bytes, limits.run_memory_bytes(), "document.arrivals", "bytes",
                       "the run memory limit FP_RUN_MAX_MEMORY_MB; lower the demand (arrival rates, horizon)")
        fit = _largest_fitting(plan, replications, search, budget)
        if fit >= 1:
            hint = f"lower {field} to at most {fit}" + (" or set params.search to false" if search else "")
            check_estimate(f"capacity-plan simulation ({shape})", estimate.seconds, budget, field, "s",
                           f"the run budget FP_RUN_BUDGET_S; {hint}")
        check_estimate(f"capacity-plan simulation ({shape})", estimate.seconds, budget, "document.horizon_days", "s",
                       "the run budget FP_RUN_BUDGET_S; even one replication does not fit: shorten horizon_days, "
                       "lower the arrival rates" + (" or set params.search to false" if search else ""))
    except ScenarioError as exc:
        raise engine_error(exc) from None
    return estimate


def capacity_plan_submit(*, plan: CapacityPlan, user: Any, params: Mapping[str, Any] | None = None,
                         force: bool = False, trigger: str = RunTrigger.MANUAL) -> SimulationRun:
    """Queue a run of ``plan``; idempotent like scenario runs (an identical queued, running or stored run of
    the same team is returned, marked ``reused``). Clusters linked to fleets take the fleets' current shape."""
    cleaned = clean_params(RunKind.FLEET, params)
    version, values = catalog_resolve(catalog=plan.catalog)
    document = capacity_plan_resolve(plan=plan, catalog=values)
    parsed = _parsed(document, values)
    plan_admit(plan=parsed, replications=int(cleaned.get("replications", parsed.replications)),
               search=bool(cleaned.get("search", True)) and bool(parsed.candidates),
               field="params.replications" if "replications" in cleaned else "document.replications")
    hash_ = input_hash(kind=RunKind.FLEET, document=document, catalog=values, params=cleaned)
    return submit_once(team_id=plan.team_id, kind=RunKind.FLEET, input_hash_=hash_, force=force, trigger=trigger,
                       create=lambda key: run_create(team=plan.team, user=user, kind=RunKind.FLEET,
                                                     document=document, version=version, values=values,
                                                     params=cleaned, force=force,
                                                     label=f"Capacity plan: {plan.name}", idempotency_key=key,
                                                     trigger=trigger,
                                                     snapshot_extra={"capacity_plan": plan_snapshot(plan)}))


DEFAULT_CHUNK = 25  # replications per child run of a replication sweep (~30-60 s of work on a worker)


def _int_param(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float) and not value.is_integer()):
        raise ValidationError({field: ["must be an integer"]})
    if not lo <= int(value) <= hi:
        raise ValidationError({field: [f"must be between {lo} and {hi}"]})
    return int(value)


def capacity_plan_replicate(*, plan: CapacityPlan, user: Any, replications: Any, seed: Any = 0,
                            chunk: Any = DEFAULT_CHUNK, idempotency_key: str | None = None) -> Sweep:
    """Fan ``replications`` seeds out over the workers as one chord: a sweep whose children are ``fleet`` runs of
    ``chunk`` seeds each (``seed + i*chunk`` ...), each with the usual claim, lease, progress and cancel; the
    chord's callback closes the sweep. :func:`replication_summary` merges the children's replications.

    Admitted like a sweep (:func:`simulations.services.sweeps.submit_children`): at most ``FP_MAX_SWEEP_RUNS``
    children, each child's estimate within the run budget, the team's share, and once per input or
    ``Idempotency-Key`` (``reused``)."""
    key_header = clean_idempotency_key(idempotency_key)
    n = _int_param(replications, "replications", 1, MAX_REPLICATIONS)
    first = _int_param(seed, "seed", 0, 2**31 - 1 - n)
    size = _int_param(chunk, "chunk", 1, 200)
    starts = list(range(first, first + n, size))
    check_child_count(len(starts), "replications", f"{n} replications in chunks of {size} make {len(starts)} "
                                                   "child runs (raise chunk)")
    version, values = catalog_resolve(catalog=plan.catalog)
    document = capacity_plan_resolve(plan=plan, catalog=values)
    parsed = _parsed(document, values)
    plan_admit(plan=parsed, replications=min(size, n), search=False, field="chunk")  # the largest child
    input_key = input_hash(kind=RunKind.FLEET, document=document, catalog=values,
                           params={"capacity_plan": plan.pk, "replicate": n, "seed": first, "chunk": size})
    existing = find_submitted(team_id=plan.team_id, user=user, input_key=input_key, count=len(starts),
                              idempotency_key=key_header)
    if existing is not None:
        return existing
    snapshot = {"capacity_plan": plan_snapshot(plan)}
    author = user if getattr(user, "pk", None) else None

    def create(keys: list[str]) -> Sweep:
        sweep = Sweep.objects.create(team=plan.team, created_by=author, updated_by=author,
                                     name=f"{plan.name}: {n} replications"[:120], kind=RunKind.FLEET,
                                     axes={"params.seed": starts}, total_runs=len(starts))
        runs = []
        for start, key in zip(starts, keys, strict=True):
            count = min(size, first + n - start)
            runs.append(run_build(team=plan.team, user=user, kind=RunKind.FLEET, document=document, version=version,
                                  values=values, params={"seed": start, "replications": count, "search": False},
                                  trigger=RunTrigger.SWEEP, sweep=sweep, idempotency_key=key, snapshot_extra=snapshot,
                                  label=f"Capacity plan: {plan.name} (seeds {start}-{start + count - 1})"))
        created = SimulationRun.objects.bulk_create(runs)
        dispatch.enqueue_runs([r.pk for r in created], sweep_id=sweep.pk)
        return sweep

    return submit_children(team=plan.team, user=user, input_key=input_key, count=len(starts),
                           idempotency_key=key_header, create=create)


def plan_sweeps(plan: CapacityPlan) -> QuerySet[Sweep]:
    """Replication sweeps of ``plan`` (newest first)."""
    runs = plan_runs(plan).filter(sweep__isnull=False).values("sweep_id")
    return Sweep.objects.filter(team_id=plan.team_id, kind=RunKind.FLEET, pk__in=runs).order_by("-created_at", "-pk")


def replication_summary(sweep: Sweep) -> dict[str, Any]:
    """Progress of a replication sweep and, once its children finished, P10/P50/P90 over every replication."""
    runs = list(SimulationRun.objects.filter(sweep_id=sweep.pk).order_by("pk"))
    done = [r for r in runs if r.status not in ACTIVE_STATUSES]
    reps: list[dict[str, Any]] = []
    for r in runs:
        if r.status == RunStatus.SUCCEEDED and isinstance(r.result, dict):
            reps.extend(r.result.get("replications") or [])
    out: dict[str, Any] = {
        "sweep": sweep.pk, "status": sweep.status, "runs": len(runs), "runs_finished": len(done),
        "progress": round(sum(r.progress if r.status in ACTIVE_STATUSES else 100 for r in runs) / max(len(runs), 1)),
        "replications_done": len(reps),
        "failed_runs": [{"run": r.pk, "error": r.error} for r in runs if r.status == RunStatus.FAILED],
        "summary": None,
    }
    if len(done) == len(runs) and reps:
        out["summary"] = summarize_compact(sorted(reps, key=lambda x: x.get("seed", 0)))
    return out
