"""Submitting capacity-plan runs (issue #14), fanning replications out over the workers, finding a plan's runs.

A run of a plan snapshots the plan document and the default catalog's values, like a scenario run, and is
deduplicated the same way (identical queued/running/stored run of the team is returned, ``reused``). The
snapshot names the plan (``input_snapshot.capacity_plan``), which is how a plan finds its runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from core.errors import ValidationError
from engine.errors import ScenarioError
from engine.fleet.metrics import summarize_compact
from engine.fleet.plan import MAX_REPLICATIONS, parse_plan
from planning.models import CapacityPlan, Fleet
from planning.services.capacity_plans import capacity_plan_resolve
from planning.services.catalogs import catalog_resolve
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun, Sweep
from simulations.services import dispatch
from simulations.services.hashing import engine_version, input_hash
from simulations.services.params import clean_params
from simulations.services.runs import _active, _reusable, idempotency_key, run_create


def plan_runs(plan: CapacityPlan) -> QuerySet[SimulationRun]:
    """Runs of ``plan`` (newest first)."""
    return SimulationRun.objects.filter(team_id=plan.team_id, kind=RunKind.FLEET,
                                        input_snapshot__capacity_plan__id=plan.pk).order_by("-queued_at", "-pk")


def plan_snapshot(plan: CapacityPlan) -> dict[str, Any]:
    """What a run records about its plan: id, name, and each linked fleet as it was (for re-evaluation)."""
    fleets = Fleet.objects.filter(team_id=plan.team_id, pk__in=list((plan.cluster_fleets or {}).values()))
    return {"id": plan.pk, "name": plan.name,
            "fleets": {str(f.pk): {"name": f.name, "updated_at": f.updated_at.isoformat()} for f in fleets}}


def capacity_plan_submit(*, plan: CapacityPlan, user: Any, params: Mapping[str, Any] | None = None,
                         force: bool = False, trigger: str = RunTrigger.MANUAL) -> SimulationRun:
    """Queue a run of ``plan``; idempotent like scenario runs (an identical queued, running or stored run of
    the same team is returned, marked ``reused``). Clusters linked to fleets take the fleets' current shape."""
    cleaned = clean_params(RunKind.FLEET, params)
    version, values = catalog_resolve(catalog=plan.catalog)
    document = capacity_plan_resolve(plan=plan, catalog=values)
    try:
        parse_plan(document, values)
    except ScenarioError as exc:
        raise ValidationError({f"document.{exc.field}": [exc.message]}) from None
    hash_ = input_hash(kind=RunKind.FLEET, document=document, catalog=values, params=cleaned)
    key = idempotency_key(team_id=plan.team_id, kind=RunKind.FLEET, input_hash_=hash_, version=engine_version())
    for _ in range(3):
        existing = None if force else _reusable(team_id=plan.team_id, kind=RunKind.FLEET, input_hash_=hash_,
                                                version=engine_version())
        existing = existing or _active(key)
        if existing is not None:
            existing.reused = True  # type: ignore[attr-defined]
            return existing
        try:
            with transaction.atomic():
                run = run_create(team=plan.team, user=user, kind=RunKind.FLEET, document=document, version=version,
                                 values=values, params=cleaned, force=force, label=f"Capacity plan: {plan.name}",
                                 idempotency_key=key, trigger=trigger)
                run.input_snapshot["capacity_plan"] = plan_snapshot(plan)
                run.save(update_fields=["input_snapshot"])
                dispatch.enqueue_runs([run.pk])
        except IntegrityError:
            continue
        run.reused = False  # type: ignore[attr-defined]
        return run
    raise ValidationError({"detail": ["identical submissions kept colliding; try again"]})


DEFAULT_CHUNK = 25  # replications per child run of a replication sweep (~30-60 s of work on a worker)


def _int_param(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float) and not value.is_integer()):
        raise ValidationError({field: ["must be an integer"]})
    if not lo <= int(value) <= hi:
        raise ValidationError({field: [f"must be between {lo} and {hi}"]})
    return int(value)


def capacity_plan_replicate(*, plan: CapacityPlan, user: Any, replications: Any, seed: Any = 0,
                            chunk: Any = DEFAULT_CHUNK) -> Sweep:
    """Fan ``replications`` seeds out over the workers as one chord: a sweep whose children are ``fleet`` runs of
    ``chunk`` seeds each (``seed + i*chunk`` ...), each with the usual claim, lease, progress and cancel; the
    chord's callback closes the sweep. :func:`replication_summary` merges the children's replications."""
    n = _int_param(replications, "replications", 1, MAX_REPLICATIONS)
    first = _int_param(seed, "seed", 0, 2**31 - 1 - n)
    size = _int_param(chunk, "chunk", 1, 200)
    version, values = catalog_resolve(catalog=plan.catalog)
    document = capacity_plan_resolve(plan=plan, catalog=values)
    try:
        parse_plan(document, values)
    except ScenarioError as exc:
        raise ValidationError({f"document.{exc.field}": [exc.message]}) from None
    starts = list(range(first, first + n, size))
    with transaction.atomic():
        sweep = Sweep.objects.create(team=plan.team, created_by=user if getattr(user, "pk", None) else None,
                                     updated_by=user if getattr(user, "pk", None) else None,
                                     name=f"{plan.name}: {n} replications"[:120], kind=RunKind.FLEET,
                                     axes={"params.seed": starts}, total_runs=len(starts))
        ids = []
        for start in starts:
            count = min(size, first + n - start)
            run = run_create(team=plan.team, user=user, kind=RunKind.FLEET, document=document, version=version,
                             values=values, params={"seed": start, "replications": count, "search": False},
                             trigger=RunTrigger.SWEEP, sweep=sweep,
                             label=f"Capacity plan: {plan.name} (seeds {start}-{start + count - 1})")
            run.input_snapshot["capacity_plan"] = plan_snapshot(plan)
            run.save(update_fields=["input_snapshot"])
            ids.append(run.pk)
        dispatch.enqueue_runs(ids, sweep_id=sweep.pk)
    return sweep


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
