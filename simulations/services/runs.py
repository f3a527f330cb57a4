"""Creating and submitting runs: snapshot, input hash, reuse of an identical stored result, admission.

Admission (issue #23): a run is queued only when its kind's estimate fits the run budgets (fabric studies:
:func:`simulations.services.fabric.fabric_admit`; capacity plans: ``capacity_plans.plan_admit``) and its team
holds fewer than ``FP_TEAM_MAX_ACTIVE_RUNS`` queued or running runs (:func:`admit`, under a lock on the team's
row, so concurrent submissions of one team cannot both take the last share: 429 with ``Retry-After``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Team
from core.errors import TooManyRequests, ValidationError
from planning import services as planning
from planning.models import CatalogVersion, Scenario
from simulations import limits
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun, Sweep
from simulations.services import dispatch
from simulations.services.fabric import fabric_admit
from simulations.services.hashing import engine_version, input_hash
from simulations.services.params import check_kind, clean_params


def _snapshot(
    *,
    scenario: Scenario | None,
    kind: str,
    document: dict[str, Any],
    version: CatalogVersion | None,
    values: dict[str, Any],
    params: dict[str, Any],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "document": document,
        "params": params,
        "overrides": dict(overrides or {}),
        "scenario": {"id": scenario.pk, "name": scenario.name} if scenario else None,
        "fleet": (
            {"id": scenario.fleet.pk, "updated_at": scenario.fleet.updated_at.isoformat()}
            if scenario is not None and scenario.fleet is not None else None
        ),
        "catalog": (
            {"id": version.catalog_id, "name": version.catalog.name, "version_id": version.pk,
             "version": version.number}
            if version is not None else {"id": None, "name": "engine default", "version_id": None, "version": None}
        ),
        "catalog_values": values,
    }


def run_build(
    *,
    team: Team,
    user: Any,
    kind: str,
    document: dict[str, Any],
    version: CatalogVersion | None,
    values: dict[str, Any],
    scenario: Scenario | None = None,
    params: Mapping[str, Any] | None = None,
    force: bool = False,
    trigger: str = RunTrigger.MANUAL,
    sweep: Sweep | None = None,
    overrides: Mapping[str, Any] | None = None,
    label: str = "",
    idempotency_key: str | None = None,
    snapshot_extra: Mapping[str, Any] | None = None,
) -> SimulationRun:
    """A QUEUED run with its snapshot and hash, not saved (:func:`run_create` saves one; sweeps bulk-insert)."""
    cleaned = clean_params(kind, params)
    snapshot = _snapshot(scenario=scenario, kind=kind, document=document, version=version, values=values,
                         params=cleaned, overrides=overrides)
    snapshot.update(snapshot_extra or {})
    author = user if getattr(user, "pk", None) else None
    return SimulationRun(
        team=team, created_by=author, updated_by=author, scenario=scenario, sweep=sweep, catalog_version=version,
        kind=kind, trigger=trigger, label=label[:200] or (scenario.name if scenario else ""),
        input_snapshot=snapshot,
        input_hash=input_hash(kind=kind, document=document, catalog=values, params=cleaned),
        engine_version=engine_version(), params=cleaned, force=force, heartbeat_at=timezone.now(),
        idempotency_key=idempotency_key,
    )


def run_create(**fields: Any) -> SimulationRun:
    """Insert a QUEUED run row with its snapshot and hash (not enqueued; see ``enqueue_runs``); the keywords of
    :func:`run_build`.

    ``idempotency_key`` is unique among queued/running runs (database constraint): inserting a second active
    run with the same key raises ``IntegrityError`` (see ``run_submit``)."""
    run = run_build(**fields)
    run.save(force_insert=True)
    return run


def lock_team(team_id: int) -> None:
    """Hold the team's row until the surrounding transaction ends: one team's submissions queue behind each other
    (nothing else writes the row often; other teams are not delayed)."""
    list(Team.objects.select_for_update().filter(pk=team_id).values_list("pk", flat=True))


def admit(*, team_id: int, runs: int) -> None:
    """The team's share of the workers: refuse (429) ``runs`` more when the team already holds
    ``FP_TEAM_MAX_ACTIVE_RUNS`` queued or running runs. Call inside the transaction that inserts them: the team's
    row is locked (``SELECT ... FOR UPDATE`` on PostgreSQL) until it commits, so concurrent submissions of one
    team are counted one after the other."""
    limit = limits.team_max_active_runs()
    lock_team(team_id)
    active = SimulationRun.objects.filter(team_id=team_id, status__in=ACTIVE_STATUSES).count()
    if active + runs > limit:
        raise TooManyRequests(
            {"detail": [f"your team has {active:,} runs queued or running; {runs:,} more would pass its share of the "
                        f"workers (FP_TEAM_MAX_ACTIVE_RUNS={limit:,}); retry when some have finished"]},
            retry_after=limits.admission_retry_after_s(),
        )


def _reusable(*, team_id: int, kind: str, input_hash_: str, version: str) -> SimulationRun | None:
    return (
        SimulationRun.objects.filter(
            team_id=team_id, kind=kind, input_hash=input_hash_, engine_version=version,
            status=RunStatus.SUCCEEDED, result__isnull=False,
        )
        .order_by("finished_at", "pk")
        .first()
    )


def idempotency_key(*, team_id: int, kind: str, input_hash_: str, version: str) -> str:
    """Identical submissions share this key: same team, kind, engine version and resolved inputs."""
    return f"{team_id}:{kind}:{version}:{input_hash_}"


def _active(key: str) -> SimulationRun | None:
    return SimulationRun.objects.filter(idempotency_key=key, status__in=ACTIVE_STATUSES).order_by("pk").first()


def submit_once(*, team_id: int, kind: str, input_hash_: str, force: bool, trigger: str,
                create: Callable[[str], SimulationRun]) -> SimulationRun:
    """Queue one run, or return the identical one the team already has (marked ``reused``).

    ``create(key)`` inserts the run with idempotency key ``key`` (:func:`run_create`). An identical run that is
    queued or running is returned with or without ``force``; without ``force`` an identical succeeded run (same
    input hash and engine version) is returned too. The team's share of the workers is checked (:func:`admit`)
    for manual submissions only (a watched item's re-evaluation is not a request to refuse). A unique constraint
    on the key makes this hold under concurrency: of N identical requests at once one insert wins and the others
    find the winner on the next pass."""
    version = engine_version()
    key = idempotency_key(team_id=team_id, kind=kind, input_hash_=input_hash_, version=version)
    for _ in range(3):
        existing = None if force else _reusable(team_id=team_id, kind=kind, input_hash_=input_hash_, version=version)
        existing = existing or _active(key)
        if existing is not None:
            existing.reused = True  # type: ignore[attr-defined]
            return existing
        try:
            with transaction.atomic():
                lock_team(team_id)
                existing = _active(key)  # committed while this request waited for the team's lock
                if existing is not None:
                    existing.reused = True  # type: ignore[attr-defined]
                    return existing
                if trigger == RunTrigger.MANUAL:
                    admit(team_id=team_id, runs=1)
                run = create(key)
                dispatch.enqueue_runs([run.pk])
        except IntegrityError:
            continue  # an identical submission inserted first
        run.reused = False  # type: ignore[attr-defined]
        return run
    raise ValidationError({"detail": ["identical submissions kept colliding; try again"]})


def run_submit(
    *,
    scenario: Scenario,
    user: Any,
    kind: str = RunKind.TCO,
    force: bool = False,
    params: Mapping[str, Any] | None = None,
    trigger: str = RunTrigger.MANUAL,
) -> SimulationRun:
    """Queue a run of ``scenario``; idempotent.

    * The resolved document is validated by the engine's parser first: nothing invalid reaches a worker.
    * An identical run that is queued or running is returned (``reused``), with or without ``force`` — a
      unique constraint on the idempotency key makes this hold under concurrency: of N identical requests at
      once one insert wins and the others answer the winner's run.
    * Without ``force``, an identical succeeded run (same input hash and engine version) is returned instead
      of computing again.
    """
    check_kind(kind)
    document, version, values = planning.scenario_resolve(scenario=scenario)
    cleaned = clean_params(kind, params)
    parsed = planning.document_validate(document=document, catalog=values)
    if kind == RunKind.FABRIC:  # flows, memory and time within the run budgets, before anything is queued
        fabric_admit(document=parsed, catalog=values, params=cleaned)
    hash_ = input_hash(kind=kind, document=document, catalog=values, params=cleaned)
    return submit_once(team_id=scenario.team_id, kind=kind, input_hash_=hash_, force=force, trigger=trigger,
                       create=lambda key: run_create(team=scenario.team, user=user, kind=kind, document=document,
                                                     version=version, values=values, scenario=scenario,
                                                     params=cleaned, force=force, trigger=trigger,
                                                     idempotency_key=key))
