"""Simulation services: submit, execute, cancel and reap runs; sweeps; re-evaluation; webhooks; preview.

Execution protocol (what makes ``acks_late`` + redelivery safe):

1. ``run_submit`` writes the run row (QUEUED) and enqueues ``simulations.execute_run(run_id)`` with
   ``transaction.on_commit`` — the worker never sees an uncommitted row.
2. ``run_execute`` *claims* the row with one compare-and-set UPDATE: QUEUED, or RUNNING whose heartbeat is
   older than the lease (its worker died). The claim stores a fresh ``claim_token``; 0 rows = someone else
   owns it or it is finished, so a duplicate delivery returns without doing anything.
3. Progress/heartbeat updates are conditional on the claim token; when they match 0 rows the run was
   cancelled or taken over, and the execution stops.
4. The result and the final status are written in ONE conditional UPDATE (status RUNNING + our token):
   exactly one execution can store a result, never half of one.
5. ``run_reap`` (periodic) re-queues runs stuck in QUEUED/RUNNING past ``FP_RUN_STUCK_AFTER_S``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import math
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone
from rest_framework import exceptions

from accounts.models import Team
from planner.planning import services as planning
from planner.planning.models import CatalogVersion, Scenario
from simulations.models import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    ReEvaluation,
    RunKind,
    RunStatus,
    RunTrigger,
    SimulationRun,
    Sweep,
)

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = int(os.environ.get("FP_RUN_MAX_ATTEMPTS", "5"))
SWEEP_AXIS_SECTIONS = planning.DOCUMENT_SECTIONS
KEY_METRICS = (
    "step_time_s", "tokens_per_s", "mfu", "time_to_train_days", "network_wait_fraction",
    "tco.usd_per_gpu_hour", "tco.run_cost_usd", "tco.usd_per_million_tokens", "tco.capex_usd",
    "tco.annual_tco_usd",
)


class TransientError(Exception):
    """Retryable infrastructure failure (the task retries it with backoff)."""


class RunAborted(Exception):
    """The run was cancelled or taken over while this execution was working on it."""


# --- helpers -----------------------------------------------------------------------------------------
def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    # numpy scalars/arrays and dataclasses from the engine
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _jsonable(value: Any) -> Any:
    """Plain JSON (no NaN/inf, no numpy types)."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return clean(json.loads(json.dumps(value, default=_json_default)))


def input_hash(*, kind: str, document: Mapping[str, Any], catalog: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """sha256 over the canonical JSON of everything the engine reads."""
    payload = {"kind": kind, "document": document, "catalog": catalog, "params": params}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def engine_version() -> str:
    from simulations.engine import ENGINE_VERSION

    return str(ENGINE_VERSION)


def _engine_call(kind: str, document: dict[str, Any], catalog: dict[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """Call the pure engine. Module-level so tests can substitute it."""
    from simulations import engine

    if kind == RunKind.PREDICT:
        result: Any = engine.predict(document, catalog=catalog)
    elif kind == RunKind.SEARCH:
        result = engine.search(document, top_k=int(params.get("top_k", 5)), catalog=catalog)
    else:
        result = engine.tco(
            document, catalog=catalog, monte_carlo=int(params.get("monte_carlo", 0)),
            sensitivity=bool(params.get("sensitivity", False)), seed=int(params.get("seed", 0)),
        )
    if hasattr(result, "to_dict"):
        result = result.to_dict()
    return _jsonable(result)


def _clean_params(kind: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    params = dict(params or {})
    allowed = {"predict": set(), "search": {"top_k"}, "tco": {"monte_carlo", "sensitivity", "seed"}}[kind]
    unknown = set(params) - allowed
    if unknown:
        raise exceptions.ValidationError({f"params.{sorted(unknown)[0]}": [f"not an option of a {kind} run"]})
    out: dict[str, Any] = {}
    if "top_k" in params:
        out["top_k"] = _bounded_int(params["top_k"], "params.top_k", 1, 50)
    if "monte_carlo" in params:
        out["monte_carlo"] = _bounded_int(params["monte_carlo"], "params.monte_carlo", 0, 100_000)
    if "seed" in params:
        out["seed"] = _bounded_int(params["seed"], "params.seed", 0, 2**31 - 1)
    if "sensitivity" in params:
        out["sensitivity"] = bool(params["sensitivity"])
    return out


def _bounded_int(value: Any, field: str, lo: int, hi: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise exceptions.ValidationError({field: ["must be an integer"]}) from None
    if not lo <= number <= hi:
        raise exceptions.ValidationError({field: [f"must be between {lo} and {hi}"]})
    return number


def _enqueue(run_ids: list[int], *, sweep_id: int | None = None) -> None:
    """Send the execute tasks after the surrounding transaction commits."""
    from simulations import tasks

    def send() -> None:
        try:
            if sweep_id is not None and len(run_ids) > 1:
                tasks.dispatch_sweep(sweep_id=sweep_id, run_ids=run_ids)
            else:
                for run_id in run_ids:
                    tasks.execute_run.apply_async(args=[run_id], queue="simulations")
        except Exception:
            # The rows are committed; the reaper re-dispatches runs whose message never made it.
            logger.exception("could not enqueue runs %s; the reaper will retry", run_ids[:20])

    transaction.on_commit(send)


# --- submit ------------------------------------------------------------------------------------------
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


def run_create(
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
) -> SimulationRun:
    """Insert a QUEUED run row with its snapshot and hash (not enqueued; see ``_enqueue``)."""
    cleaned = _clean_params(kind, params)
    snapshot = _snapshot(scenario=scenario, kind=kind, document=document, version=version, values=values,
                         params=cleaned, overrides=overrides)
    now = timezone.now()
    return SimulationRun.objects.create(
        team=team,
        created_by=user if getattr(user, "pk", None) else None,
        updated_by=user if getattr(user, "pk", None) else None,
        scenario=scenario,
        sweep=sweep,
        catalog_version=version,
        kind=kind,
        trigger=trigger,
        label=label[:200] or (scenario.name if scenario else ""),
        input_snapshot=snapshot,
        input_hash=input_hash(kind=kind, document=document, catalog=values, params=cleaned),
        engine_version=engine_version(),
        params=cleaned,
        force=force,
        heartbeat_at=now,
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


def run_submit(
    *,
    scenario: Scenario,
    user: Any,
    kind: str = RunKind.TCO,
    force: bool = False,
    params: Mapping[str, Any] | None = None,
    trigger: str = RunTrigger.MANUAL,
) -> SimulationRun:
    """Queue a run of ``scenario``. Idempotent: without ``force``, an identical succeeded run
    (same input hash and engine version) is returned instead of computing again."""
    if kind not in RunKind.values:
        raise exceptions.ValidationError({"kind": [f"must be one of {', '.join(RunKind.values)}"]})
    document, version, values = planning.scenario_resolve(scenario=scenario)
    cleaned = _clean_params(kind, params)
    if not force:
        existing = _reusable(
            team_id=scenario.team_id, kind=kind,
            input_hash_=input_hash(kind=kind, document=document, catalog=values, params=cleaned),
            version=engine_version(),
        )
        if existing is not None:
            existing.reused = True  # type: ignore[attr-defined]
            return existing
    with transaction.atomic():
        run = run_create(team=scenario.team, user=user, kind=kind, document=document, version=version,
                         values=values, scenario=scenario, params=cleaned, force=force, trigger=trigger)
        _enqueue([run.pk])
    run.reused = False  # type: ignore[attr-defined]
    return run


def run_cancel(*, run: SimulationRun, user: Any) -> SimulationRun:
    """Cancel a queued or running run (a running execution notices at its next progress write)."""
    now = timezone.now()
    changed = SimulationRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.CANCELLED, cancel_requested=True, finished_at=now,
        progress_message=f"cancelled by {getattr(user, 'username', 'system')}",
        updated_by=user if getattr(user, "pk", None) else None, updated_at=now,
    )
    run.refresh_from_db()
    if not changed:
        raise exceptions.ValidationError({"status": [f"run is already {run.status}; only queued or running runs can be cancelled"]})
    if run.sweep_id:
        sweep_refresh(sweep_id=run.sweep_id)
    return run


# --- execute -----------------------------------------------------------------------------------------
def _lease_s() -> int:
    return int(getattr(settings, "FP_RUN_STUCK_AFTER_S", 900))


def run_claim(*, run_id: int) -> str | None:
    """Compare-and-set QUEUED (or RUNNING with an expired lease) → RUNNING; returns the claim token."""
    now = timezone.now()
    token = uuid.uuid4().hex
    expired = now - timedelta(seconds=_lease_s())
    claimed = (
        SimulationRun.objects.filter(pk=run_id)
        .filter(Q(status=RunStatus.QUEUED) | Q(status=RunStatus.RUNNING, heartbeat_at__lt=expired))
        .filter(attempts__lt=MAX_ATTEMPTS)
        .update(status=RunStatus.RUNNING, started_at=now, heartbeat_at=now, claim_token=token,
                attempts=F("attempts") + 1, progress=1, progress_message="started")
    )
    return token if claimed else None


def _progress(run_id: int, token: str, progress: int, message: str) -> None:
    n = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
        progress=progress, progress_message=message[:200], heartbeat_at=timezone.now()
    )
    if not n:
        raise RunAborted(run_id)


def _finish(run_id: int, token: str, **fields: Any) -> bool:
    """Write the final status (+ result) in one conditional UPDATE inside a transaction."""
    now = timezone.now()
    with transaction.atomic():
        n = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
            finished_at=now, heartbeat_at=now, updated_at=now, **fields
        )
    return bool(n)


def _test_delay(run_id: int, token: str) -> None:
    """FP_TASK_TEST_DELAY_S (tests only): make each run take this long, heartbeating as it waits."""
    delay = float(os.environ.get("FP_TASK_TEST_DELAY_S") or 0)
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        _progress(run_id, token, 20, "simulating")


def run_execute(*, run_id: int) -> SimulationRun | None:
    """Claim and execute one run (the body of the Celery task). Safe to call any number of times."""
    token = run_claim(run_id=run_id)
    if token is None:
        return None
    run = SimulationRun.objects.get(pk=run_id)
    try:
        _progress(run_id, token, 5, "checking for an identical stored result")
        if not run.force:
            prior = (
                SimulationRun.objects.filter(
                    team_id=run.team_id, kind=run.kind, input_hash=run.input_hash,
                    engine_version=run.engine_version, status=RunStatus.SUCCEEDED, result__isnull=False,
                )
                .exclude(pk=run.pk)
                .order_by("finished_at", "pk")
                .first()
            )
            if prior is not None:
                _finish(run_id, token, status=RunStatus.SUCCEEDED, result=prior.result, reused_from=prior,
                        progress=100, progress_message=f"identical to run {prior.pk}; stored result reused")
                return _after_finish(run_id)
        _test_delay(run_id, token)
        _progress(run_id, token, 30, f"running {run.kind}")
        snapshot = run.input_snapshot
        result = _engine_call(run.kind, dict(snapshot["document"]), dict(snapshot["catalog_values"]), run.params)
        _progress(run_id, token, 90, "storing result")
        _finish(run_id, token, status=RunStatus.SUCCEEDED, result=result, progress=100,
                progress_message="done", error="", error_field="")
    except RunAborted:
        logger.info("run %s was cancelled or taken over; stopping", run_id)
        return _after_finish(run_id)
    except TransientError:
        _release(run_id, token)
        raise
    except ValueError as exc:  # engine ScenarioError / CatalogError name the field
        field = str(getattr(exc, "field", "") or "")
        message = str(getattr(exc, "message", "") or exc)
        _finish(run_id, token, status=RunStatus.FAILED, error=message[:5000], error_field=field[:120],
                progress=100, progress_message="failed")
    except Exception as exc:
        if _is_transient(exc):
            _release(run_id, token)
            raise
        if type(exc).__name__ == "SoftTimeLimitExceeded":
            _finish(run_id, token, status=RunStatus.FAILED, error="time limit exceeded", progress=100,
                    progress_message="failed")
        else:
            logger.exception("run %s failed", run_id)
            _finish(run_id, token, status=RunStatus.FAILED, error=f"internal error: {type(exc).__name__}: {exc}"[:5000],
                    progress=100, progress_message="failed")
    return _after_finish(run_id)


def _is_transient(exc: BaseException) -> bool:
    from django.db import InterfaceError, OperationalError

    return isinstance(exc, OperationalError | InterfaceError | ConnectionError | TimeoutError)


def _release(run_id: int, token: str) -> None:
    """Give a claimed run back to the queue before a transient-error retry."""
    from django.db import connection

    for attempt in range(2):
        try:
            SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, claim_token=token).update(
                status=RunStatus.QUEUED, claim_token="", progress_message="retrying after a transient error",
                heartbeat_at=timezone.now(),
            )
            return
        except Exception:
            # The connection itself may be what broke: drop it so the next query reconnects.
            connection.close()
            if attempt:
                # Still failing: the reaper re-queues the run once its lease expires.
                logger.warning("could not release run %s for retry", run_id, exc_info=True)


def _after_finish(run_id: int) -> SimulationRun:
    run = SimulationRun.objects.get(pk=run_id)
    if run.is_terminal:
        if run.sweep_id:
            sweep_refresh(sweep_id=run.sweep_id)
        if run.trigger == RunTrigger.REEVALUATION:
            reevaluation_complete(run=run)
    return run


def run_reap(*, stuck_after_s: int | None = None) -> dict[str, int]:
    """Re-queue runs stuck in QUEUED/RUNNING longer than the lease (lost message, dead worker)."""
    lease = stuck_after_s if stuck_after_s is not None else _lease_s()
    now = timezone.now()
    cutoff = now - timedelta(seconds=lease)
    counts = {"requeued": 0, "redispatched": 0, "failed": 0}
    # Give up on runs that keep dying.
    counts["failed"] = SimulationRun.objects.filter(
        status__in=ACTIVE_STATUSES, heartbeat_at__lt=cutoff, attempts__gte=MAX_ATTEMPTS
    ).update(status=RunStatus.FAILED, finished_at=now, error=f"gave up after {MAX_ATTEMPTS} attempts",
             progress_message="failed")
    ids: list[int] = []
    for run_id in SimulationRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).values_list("pk", flat=True):
        if SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).update(
            status=RunStatus.QUEUED, claim_token="", heartbeat_at=now, progress_message="re-queued by reaper"
        ):
            counts["requeued"] += 1
            ids.append(run_id)
    for run_id in SimulationRun.objects.filter(status=RunStatus.QUEUED, heartbeat_at__lt=cutoff).values_list("pk", flat=True):
        if SimulationRun.objects.filter(pk=run_id, status=RunStatus.QUEUED, heartbeat_at__lt=cutoff).update(heartbeat_at=now):
            counts["redispatched"] += 1
            ids.append(run_id)
    if ids:
        from simulations import tasks

        for run_id in ids:
            tasks.execute_run.apply_async(args=[run_id], queue="simulations")
    for sweep_id in set(SimulationRun.objects.filter(pk__in=ids, sweep__isnull=False).values_list("sweep_id", flat=True)):
        sweep_refresh(sweep_id=sweep_id)
    return counts


# --- sweeps ------------------------------------------------------------------------------------------
def sweep_expand(*, axes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Cartesian product of the axes → list of ``{path: value}`` overrides. Validates before anything."""
    if not isinstance(axes, Mapping) or not axes:
        raise exceptions.ValidationError({"axes": ['give at least one axis, e.g. {"cluster.nic_gbps": [400, 800]}']})
    errors: dict[str, list[str]] = {}
    names = list(axes)
    for name in names:
        values = axes[name]
        section = str(name).split(".")[0]
        if section not in SWEEP_AXIS_SECTIONS or "." not in str(name):
            errors[f"axes.{name}"] = [f"must be a dotted path under one of {', '.join(SWEEP_AXIS_SECTIONS)}"]
        elif not isinstance(values, list) or not values:
            errors[f"axes.{name}"] = ["must be a non-empty list of values"]
    if errors:
        raise exceptions.ValidationError(errors)
    total = math.prod(len(axes[n]) for n in names)
    limit = int(getattr(settings, "FP_MAX_SWEEP_RUNS", 512))
    if total > limit:
        raise exceptions.ValidationError(
            {"axes": [f"expands to {total} runs, more than the limit FP_MAX_SWEEP_RUNS={limit}"]}
        )
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]


def sweep_submit(
    *, scenario: Scenario, axes: Mapping[str, Any], user: Any, kind: str = RunKind.TCO, name: str = "",
    params: Mapping[str, Any] | None = None,
) -> Sweep:
    """Expand ``axes`` over the scenario into child runs and fan them out on the simulations queue."""
    if kind not in RunKind.values:
        raise exceptions.ValidationError({"kind": [f"must be one of {', '.join(RunKind.values)}"]})
    combos = sweep_expand(axes=axes)  # raises before anything is created
    cleaned = _clean_params(kind, params)
    base, version, values = planning.scenario_resolve(scenario=scenario)
    with transaction.atomic():
        sweep = Sweep.objects.create(
            team=scenario.team, created_by=user, updated_by=user, scenario=scenario, kind=kind,
            name=name or f"{scenario.name} sweep", axes=dict(axes), total_runs=len(combos),
        )
        ids = []
        for combo in combos:
            doc = json.loads(json.dumps(base))
            for path, value in combo.items():
                planning.set_path(doc, path, value)
            label = ", ".join(f"{p.split('.')[-1]}={v}" for p, v in combo.items())
            run = run_create(team=scenario.team, user=user, kind=kind, document=doc, version=version,
                             values=values, scenario=scenario, params=cleaned, trigger=RunTrigger.SWEEP,
                             sweep=sweep, overrides=combo, label=label)
            ids.append(run.pk)
        _enqueue(ids, sweep_id=sweep.pk)
    return sweep


def _metric(result: Mapping[str, Any] | None, path: str) -> float | None:
    node: Any = result or {}
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


def sweep_refresh(*, sweep_id: int) -> Sweep:
    """Recompute a sweep's status and summary from its runs (idempotent; any caller, any time)."""
    sweep = Sweep.objects.get(pk=sweep_id)
    counts = dict(SimulationRun.objects.filter(sweep_id=sweep_id).values_list("status").annotate(n=Count("pk")))
    total = sum(counts.values())
    active = counts.get(RunStatus.QUEUED, 0) + counts.get(RunStatus.RUNNING, 0)
    if active:
        status = RunStatus.RUNNING if counts.get(RunStatus.RUNNING) or total - active else RunStatus.QUEUED
        Sweep.objects.filter(pk=sweep_id).update(
            status=status, summary={"counts": counts, "total": total}, finished_at=None, updated_at=timezone.now()
        )
        sweep.refresh_from_db()
        return sweep
    if counts.get(RunStatus.SUCCEEDED, 0) == total and total:
        status = RunStatus.SUCCEEDED
    elif counts.get(RunStatus.CANCELLED, 0) == total:
        status = RunStatus.CANCELLED
    elif counts.get(RunStatus.SUCCEEDED, 0):
        status = RunStatus.SUCCEEDED  # partial success: failures are listed in the summary
    else:
        status = RunStatus.FAILED
    rows = []
    for run in SimulationRun.objects.filter(sweep_id=sweep_id).order_by("pk"):
        row: dict[str, Any] = {"run": run.pk, "status": run.status, "overrides": run.input_snapshot.get("overrides", {})}
        if run.status == RunStatus.SUCCEEDED:
            row["metrics"] = {m: _metric(run.result, m) for m in KEY_METRICS if _metric(run.result, m) is not None}
        elif run.error:
            row["error"] = run.error
        rows.append(row)
    best: dict[str, Any] = {}
    for metric, lowest in (("tco.usd_per_million_tokens", True), ("step_time_s", True),
                           ("time_to_train_days", True), ("mfu", False)):
        scored = sorted((r for r in rows if r.get("metrics", {}).get(metric) is not None),
                        key=lambda r, m=metric: (r["metrics"][m], r["run"]))  # type: ignore[misc]
        if scored:
            pick = scored[0] if lowest else scored[-1]
            best[metric] = {"run": pick["run"], "value": pick["metrics"][metric], "overrides": pick["overrides"]}
    summary = {"counts": counts, "total": total, "best": best, "runs": rows}
    Sweep.objects.filter(pk=sweep_id).update(
        status=status, summary=summary, finished_at=sweep.finished_at or timezone.now(), updated_at=timezone.now()
    )
    sweep.refresh_from_db()
    return sweep


def sweep_cancel(*, sweep: Sweep, user: Any) -> Sweep:
    now = timezone.now()
    SimulationRun.objects.filter(sweep=sweep, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.CANCELLED, cancel_requested=True, finished_at=now,
        progress_message=f"cancelled by {getattr(user, 'username', 'system')}",
    )
    return sweep_refresh(sweep_id=sweep.pk)


# --- preview -----------------------------------------------------------------------------------------
PREVIEW_FIELDS = (
    "step_time_s", "tokens_per_s", "mfu", "hfu", "time_to_train_days", "gpu_hours", "network_wait_fraction",
    "memory_gb_per_gpu", "fits",
)


def preview(*, document: Mapping[str, Any], catalog: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A synchronous quick estimate for live forms: performance + the headline cost figures."""
    from simulations import engine

    started = time.perf_counter()
    cat = dict(catalog) if catalog is not None else planning.catalog_resolve(catalog=None)[1]
    doc = json.loads(json.dumps(dict(document)))
    perf = _jsonable(engine.predict(doc, catalog=cat).to_dict())
    out: dict[str, Any] = {k: perf.get(k) for k in PREVIEW_FIELDS if k in perf}
    out["breakdown_s"] = perf.get("breakdown_s")
    out["parallelism"] = perf.get("parallelism")
    if out.get("fits", True):
        try:
            costs = _jsonable(engine.tco(doc, catalog=cat))
            t = costs.get("tco", {})
            for key in ("run_cost_usd", "usd_per_gpu_hour", "usd_per_million_tokens", "capex_usd", "annual_tco_usd"):
                out[key] = t.get(key)
        except ValueError as exc:
            if not hasattr(exc, "field"):
                raise
            out["cost_error"] = {str(exc.field): str(getattr(exc, "message", exc))}
    out["engine_version"] = engine_version()
    out["server_time_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return out


# --- scheduled re-evaluation --------------------------------------------------------------------------
def _reevaluation_key(*, scenario: Scenario, hash_: str, version: CatalogVersion | None) -> str:
    return f"reeval:{scenario.pk}:{hash_}:{version.pk if version else 0}:{engine_version()}"


def scenario_needs_reevaluation(*, scenario: Scenario) -> tuple[bool, list[str], SimulationRun | None]:
    """Has the followed catalog version, the fleet or the engine changed since the last succeeded run?"""
    last = (
        SimulationRun.objects.filter(scenario=scenario, sweep__isnull=True, status=RunStatus.SUCCEEDED)
        .order_by("-finished_at", "-pk").first()
    )
    if last is None:
        return True, ["never evaluated"], None
    document, version, values = planning.scenario_resolve(scenario=scenario)
    reasons = []
    snap = last.input_snapshot or {}
    if (version.pk if version else None) != snap.get("catalog", {}).get("version_id"):
        reasons.append(
            f"catalog version v{snap.get('catalog', {}).get('version')} → v{version.number if version else '?'}"
        )
    fleet_snap = snap.get("fleet") or {}
    fleet = scenario.fleet
    if fleet is not None and (fleet_snap.get("id") != fleet.pk
                              or fleet_snap.get("updated_at") != fleet.updated_at.isoformat()):
        reasons.append(f"fleet {fleet.name} changed")
    if last.engine_version != engine_version():
        reasons.append(f"engine {last.engine_version} → {engine_version()}")
    if not reasons and last.input_hash != input_hash(kind=last.kind, document=document, catalog=values,
                                                     params=last.params):
        reasons.append("scenario inputs changed")
    return bool(reasons), reasons, last


def reevaluate_watched(*, scenario_ids: list[int] | None = None) -> list[ReEvaluation]:
    """Re-run watched scenarios whose inputs moved. Each change is re-evaluated once (unique key)."""
    created: list[ReEvaluation] = []
    qs = Scenario.objects.filter(watched=True).select_related("fleet", "workload", "catalog", "pinned_version", "team")
    if scenario_ids is not None:
        qs = qs.filter(pk__in=scenario_ids)
    for scenario in qs.order_by("pk"):
        try:
            needed, reasons, last = scenario_needs_reevaluation(scenario=scenario)
            if not needed:
                continue
            kind = last.kind if last is not None else RunKind.TCO
            document, version, values = planning.scenario_resolve(scenario=scenario)
            params = last.params if last is not None else {}
            hash_ = input_hash(kind=kind, document=document, catalog=values, params=params)
            with transaction.atomic():
                reeval = ReEvaluation.objects.create(
                    team=scenario.team, scenario=scenario, previous_run=last, reasons=reasons,
                    idempotency_key=_reevaluation_key(scenario=scenario, hash_=hash_, version=version),
                )
                run = run_create(team=scenario.team, user=None, kind=kind, document=document, version=version,
                                 values=values, scenario=scenario, params=params, force=True,
                                 trigger=RunTrigger.REEVALUATION, label=f"{scenario.name} (re-evaluation)")
                reeval.new_run = run
                reeval.save(update_fields=["new_run"])
                _enqueue([run.pk])
            created.append(reeval)
        except IntegrityError:
            continue  # another beat already re-evaluated this change
        except (ValueError, exceptions.ValidationError) as exc:
            logger.warning("re-evaluation of scenario %s skipped: %s", scenario.pk, exc)
    return created


def _pct(old: float | None, new: float | None) -> float | None:
    if old is None or new is None or old == 0:
        return None
    return (new - old) / abs(old) * 100.0


def _catalog_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    notes = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if a is None:
            notes.append(f"{key} added")
        elif b is None:
            notes.append(f"{key} removed")
        elif a.get("unit_price_usd") != b.get("unit_price_usd"):
            p = _pct(a.get("unit_price_usd"), b.get("unit_price_usd"))
            notes.append(f"{b.get('name') or key} price {p:+.0f}%" if p is not None else f"{key} price changed")
        elif a.get("power_w") != b.get("power_w"):
            p = _pct(a.get("power_w"), b.get("power_w"))
            notes.append(f"{b.get('name') or key} power {p:+.0f}%" if p is not None else f"{key} power changed")
        else:
            notes.append(f"{key} specs changed")
    return notes


def run_diff(*, previous: SimulationRun | None, new: SimulationRun) -> tuple[dict[str, Any], str]:
    """Per-metric changes between two runs and a one-line human summary of why."""
    from simulations.reports import run_metrics

    new_m = run_metrics(new)
    old_m = run_metrics(previous) if previous is not None else {}
    changes = {}
    for metric in sorted(set(new_m) | set(old_m)):
        a, b = old_m.get(metric), new_m.get(metric)
        if a != b:
            changes[metric] = {"before": a, "after": b, "delta": (b - a) if a is not None and b is not None else None,
                               "delta_pct": _pct(a, b)}
    causes: list[str] = []
    if previous is not None:
        causes = _catalog_changes(previous.input_snapshot.get("catalog_values", {}),
                                  new.input_snapshot.get("catalog_values", {}))
        if previous.input_snapshot.get("document") != new.input_snapshot.get("document"):
            causes.append("cluster/workload inputs changed")
        if previous.engine_version != new.engine_version:
            causes.append(f"engine {previous.engine_version} → {new.engine_version}")
    headline = []
    for metric, label in (("tco.annual_tco_usd", "TCO"), ("tco.usd_per_million_tokens", "$/Mtok"),
                          ("step_time_s", "step time"), ("time_to_train_days", "time to train")):
        pct = changes.get(metric, {}).get("delta_pct")
        if pct is not None and abs(pct) >= 0.05:
            headline.append(f"{label} {pct:+.1f}%")
    text = "first evaluation" if previous is None else ", ".join(headline) or "no material change"
    if causes:
        text += ": " + "; ".join(causes[:5]) + (f" (+{len(causes) - 5} more)" if len(causes) > 5 else "")
    return changes, text


def reevaluation_complete(*, run: SimulationRun) -> ReEvaluation | None:
    """Record the diff of a finished re-evaluation run and queue the team webhook (once)."""
    reeval = ReEvaluation.objects.filter(new_run=run).select_related("previous_run", "team", "scenario").first()
    if reeval is None or reeval.completed_at is not None:
        return reeval
    if run.status == RunStatus.SUCCEEDED:
        changes, text = run_diff(previous=reeval.previous_run, new=run)
    else:
        changes, text = {}, f"re-evaluation {run.status}: {run.error}"
    webhook = bool(reeval.team.webhook_url)
    n = ReEvaluation.objects.filter(pk=reeval.pk, completed_at__isnull=True).update(
        changes=changes, summary=text[:2000], completed_at=timezone.now(),
        delivery_status=ReEvaluation.Delivery.PENDING if webhook else ReEvaluation.Delivery.NONE,
    )
    if n:
        Scenario.objects.filter(pk=reeval.scenario_id).update(last_evaluated_at=timezone.now(),
                                                              last_evaluated_hash=run.input_hash)
        if webhook:
            from simulations import tasks

            reeval_id = reeval.pk

            def send() -> None:
                tasks.deliver_webhook.apply_async(args=[reeval_id], queue="default")

            transaction.on_commit(send)
    reeval.refresh_from_db()
    return reeval


# --- webhooks ----------------------------------------------------------------------------------------
class WebhookError(Exception):
    pass


def webhook_payload(*, reevaluation: ReEvaluation) -> dict[str, Any]:
    return {
        "event": "scenario.reevaluated",
        "id": reevaluation.pk,
        "team": reevaluation.team.slug,
        "scenario": {"id": reevaluation.scenario_id, "name": reevaluation.scenario.name},
        "previous_run": reevaluation.previous_run_id,
        "new_run": reevaluation.new_run_id,
        "reasons": reevaluation.reasons,
        "summary": reevaluation.summary,
        "changes": reevaluation.changes,
    }


def webhook_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>``."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def webhook_deliver(*, reevaluation_id: int, timeout_s: float = 10.0) -> bool:
    """POST the diff to the team webhook, signed. Raises WebhookError on a retryable failure."""
    reeval = ReEvaluation.objects.select_related("team", "scenario").get(pk=reevaluation_id)
    if reeval.delivery_status in (ReEvaluation.Delivery.DELIVERED, ReEvaluation.Delivery.NONE):
        return reeval.delivery_status == ReEvaluation.Delivery.DELIVERED
    team = reeval.team
    if not team.webhook_url:
        ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_status=ReEvaluation.Delivery.NONE)
        return False
    from accounts.webhooks import WebhookTargetError, check_webhook_url

    try:
        check_webhook_url(team.webhook_url, resolve=True)
    except WebhookTargetError as exc:
        webhook_give_up(reevaluation_id=reeval.pk, error=f"webhook_url {exc.message}")
        return False
    body = canonical_json(webhook_payload(reevaluation=reeval)).encode("utf-8")
    ts = str(int(time.time()))
    request = urllib.request.Request(  # noqa: S310 (scheme checked above)
        team.webhook_url, data=body, method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "FabricPlanner-Webhook/1",
            "X-Fabric-Planner-Event": "scenario.reevaluated",
            "X-Fabric-Planner-Delivery": str(reeval.pk),
            "X-Fabric-Planner-Timestamp": ts,
            "X-Fabric-Planner-Signature": webhook_signature(secret=team.webhook_secret, timestamp=ts, body=body),
        },
    )
    ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_attempts=F("delivery_attempts") + 1)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 (scheme checked above)
            code = response.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (urllib.error.URLError, OSError) as exc:
        ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_error=str(exc)[:2000])
        raise WebhookError(str(exc)) from exc
    if 200 <= code < 300:
        ReEvaluation.objects.filter(pk=reeval.pk).update(
            delivery_status=ReEvaluation.Delivery.DELIVERED, delivered_at=timezone.now(), delivery_error=""
        )
        return True
    ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_error=f"HTTP {code}")
    if code >= 500 or code == 429:
        raise WebhookError(f"HTTP {code}")
    ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_status=ReEvaluation.Delivery.FAILED)
    return False


def webhook_give_up(*, reevaluation_id: int, error: str) -> None:
    ReEvaluation.objects.filter(pk=reevaluation_id).update(
        delivery_status=ReEvaluation.Delivery.FAILED, delivery_error=error[:2000]
    )


__all__ = [
    "TERMINAL_STATUSES",
    "preview",
    "reevaluate_watched",
    "run_cancel",
    "run_execute",
    "run_reap",
    "run_submit",
    "sweep_refresh",
    "sweep_submit",
]


# --- saved reports -----------------------------------------------------------------------------------
def _report_runs_check(*, team_id: int, runs: list[SimulationRun], baseline: SimulationRun) -> None:
    if not runs:
        raise exceptions.ValidationError({"runs": ["give at least one run"]})
    foreign = [r.pk for r in runs if r.team_id != team_id]
    if foreign:
        raise exceptions.ValidationError({"runs": [f"run(s) not found: {', '.join(map(str, foreign))}"]})
    if baseline.team_id != team_id:
        raise exceptions.ValidationError({"baseline": [f"run {baseline.pk} not found"]})


def report_create(
    *, team: Team, user: Any, name: str, runs: list[SimulationRun], baseline: SimulationRun | None = None,
    description: str = "", metrics: list[str] | None = None,
) -> Any:
    from simulations.models import Report

    if not name.strip():
        raise exceptions.ValidationError({"name": ["This field is required."]})
    baseline = baseline or (runs[0] if runs else None)
    if baseline is None:
        raise exceptions.ValidationError({"runs": ["give at least one run"]})
    _report_runs_check(team_id=team.pk, runs=runs, baseline=baseline)
    with transaction.atomic():
        report = Report.objects.create(team=team, created_by=user, updated_by=user, name=name.strip(),
                                       description=description, baseline=baseline, metrics=list(metrics or []))
        report.runs.set({*runs, baseline})
    return report


def report_update(*, report: Any, user: Any, **fields: Any) -> Any:
    runs = fields.pop("runs", None)
    baseline = fields.pop("baseline", None) or report.baseline
    current = list(report.runs.all()) if runs is None else runs
    _report_runs_check(team_id=report.team_id, runs=current, baseline=baseline)
    with transaction.atomic():
        for key in ("name", "description", "metrics"):
            if key in fields:
                setattr(report, key, fields[key])
        report.baseline = baseline
        report.updated_by = user
        report.save()
        report.runs.set({*current, baseline})
    return report
