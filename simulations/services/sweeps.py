"""Sweeps: expand axes into child runs, fan them out, and aggregate their results.

Admission (issue #23): before anything is written, the child count is within ``FP_MAX_SWEEP_RUNS`` (checked from
the axis lengths), every child's document parses, and every child passes the checks a run of its kind would fail
on at run time (fabric studies: placement, layout, flow and memory ceilings, the run budget). Then, in one
transaction holding the team's row, the team's share (``FP_TEAM_MAX_ACTIVE_RUNS``) and de-duplication:

* identical input while active — every child gets the idempotency key ``sweep:<input hash>:<index>``, unique
  among queued and running runs (the database's partial unique index), so of N identical concurrent requests one
  inserts and the others answer its sweep (``reused``);
* an ``Idempotency-Key`` header — remembered ``FP_IDEMPOTENCY_TTL_S`` in the shared cache (Redis, or the database
  cache inside the same transaction), so a retried request answers the sweep it created; the same key with other
  input is a 409.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from core.errors import Conflict, ValidationError
from engine.errors import ScenarioError
from engine.schema.bounds import MAX_SWEEP_AXES, bound_for, check_field
from planning import services as planning
from planning.models import Scenario
from simulations import limits, metrics
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun, Sweep
from simulations.reports import run_fits
from simulations.services import dispatch
from simulations.services.fabric import fabric_admit
from simulations.services.hashing import canonical_json, input_hash
from simulations.services.params import check_kind, clean_params
from simulations.services.runs import admit, lock_team, run_build

# "params.<option>" axes vary a run option instead of the document (fabric studies: params.routing,
# params.placement), e.g. {"params.routing": ["ecmp", "adaptive"], "cluster.oversubscription": [1, 2]}
PARAMS_AXIS = "params."
SWEEP_AXIS_SECTIONS = (*planning.DOCUMENT_SECTIONS, "params")
KEY_METRICS = tuple(m.key for m in metrics.SWEEP)  # what every sweep row records (simulations.metrics)


def sweep_expand(*, axes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Cartesian product of the axes → list of ``{path: value}`` overrides. Validates before anything."""
    if not isinstance(axes, Mapping) or not axes:
        raise ValidationError({"axes": ['give at least one axis, e.g. {"cluster.nic_gbps": [400, 800]}']})
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
        raise ValidationError(errors)
    if len(names) > MAX_SWEEP_AXES:
        raise ValidationError({"axes": [f"has {len(names)} axes, more than the limit of {MAX_SWEEP_AXES}"]})
    total = math.prod(len(axes[n]) for n in names)
    check_child_count(total, "axes", f"expands to {total} runs")
    for name in names:  # every value is one scenario value of its field's type and bound
        bad = [msg for msg in (_axis_value_error(str(name), v) for v in axes[name]) if msg]
        if bad:
            errors[f"axes.{name}"] = bad[:5]
    if errors:
        raise ValidationError(errors)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]


def check_child_count(count: int, field: str, what: str) -> None:
    """The one child limit of sweeps and replication fan-outs (``FP_MAX_SWEEP_RUNS``), before anything is built."""
    limit = limits.max_child_runs()
    if count > limit:
        raise ValidationError({field: [f"{what}, more than the limit FP_MAX_SWEEP_RUNS={limit}"]})


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, float) else f"{value:g}"
    return text if len(text) <= 40 else text[:37] + "..."


def _axis_value_error(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be a value of the document field ``name`` (None if it can)."""
    if value is None or isinstance(value, dict | list):
        return f"each value must be one number, string or boolean, got {_short(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"value {_short(value)} is not a finite number"
    if bound_for(name) is not None:
        try:
            check_field(value, name)
        except ScenarioError as exc:
            return f"value {_short(value)}: {exc.message}"
    return None


def _combination_documents(
    base: Mapping[str, Any], combos: list[dict[str, Any]], catalog: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[Any]]:
    """The document of every combination and what the engine's parser made of it, each validated before anything
    is created (identical combinations, e.g. a sweep over ``params.*`` only, are parsed once)."""
    docs: list[dict[str, Any]] = []
    parsed: list[Any] = []
    seen: dict[str, tuple[dict[str, Any], Any]] = {}
    runnable: set[tuple[str, ...]] = set()  # layout spaces already checked (a cost axis shares one)
    errors: dict[str, list[str]] = {}
    for combo in combos:
        key = canonical_json(combo)
        if key in seen:
            docs.append(seen[key][0])
            parsed.append(seen[key][1])
            continue
        doc = json.loads(json.dumps(base))
        for path, value in combo.items():
            planning.set_dotted(doc, path, value)
        scenario = None
        try:
            scenario = planning.document_validate(document=doc, catalog=catalog, runnable=False)
            space = planning.runnable_key(doc)
            if space not in runnable:
                planning.runnable_validate(spec=scenario, catalog=catalog)
                runnable.add(space)
        except ValidationError as exc:
            _child_error(errors, combo, exc)
            if sum(len(v) for v in errors.values()) >= 5:
                break
        seen[key] = (doc, scenario)
        docs.append(doc)
        parsed.append(scenario)
    if errors:
        raise ValidationError(errors)
    return docs, parsed


def _child_error(errors: dict[str, list[str]], combo: Mapping[str, Any], exc: ValidationError) -> None:
    """File a child's error under the axis it comes from (``axes.<path>``), with the child's values."""
    detail = exc.detail if isinstance(exc.detail, dict) else {"detail": exc.detail}
    field, messages = next(iter(detail.items()))
    message = str(messages[0] if isinstance(messages, list) and messages else messages)
    axis = next((p for p in combo if str(field) == p or str(field).startswith(p + ".")), None)
    label = ", ".join(f"{p}={_short(v)}" for p, v in combo.items())
    errors.setdefault(f"axes.{axis}" if axis else "axes", []).append(f"{label}: {field}: {message}")


def admit_children(*, kind: str, combos: list[dict[str, Any]], parsed: list[Any], run_params: list[dict[str, Any]],
                   catalog: Mapping[str, Any]) -> None:
    """Every check a child of ``kind`` would fail at run time, applied to every child before anything is queued
    (fabric studies: placement, layout, traffic groups, flow and memory ceilings, the run budget)."""
    if kind != RunKind.FABRIC:
        return  # the other kinds' work is bounded by the parser's bounds table (engine.schema.bounds)
    errors: dict[str, list[str]] = {}
    done: dict[str, ValidationError | None] = {}
    for combo, scenario, run_param in zip(combos, parsed, run_params, strict=True):
        key = canonical_json({"doc": {p: v for p, v in combo.items() if not p.startswith(PARAMS_AXIS)},
                              "params": run_param})
        if key not in done:
            try:
                fabric_admit(document=scenario, catalog=catalog, params=run_param)
                done[key] = None
            except ValidationError as exc:
                done[key] = exc
        failure = done[key]
        if failure is not None:
            _child_error(errors, combo, failure)
            if sum(len(v) for v in errors.values()) >= 5:
                break
    if errors:
        raise ValidationError(errors)


# ------------------------------------------------------------------------ submitting children once (#23)
IDEMPOTENCY_HEADER = "Idempotency-Key"


def clean_idempotency_key(value: Any) -> str | None:
    """The ``Idempotency-Key`` header: 1-255 printable ASCII characters (None when absent)."""
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > 255 or not value.isascii() or not value.isprintable():
        raise ValidationError({IDEMPOTENCY_HEADER: ["must be 1 to 255 printable ASCII characters"]})
    return value


def _remembered_key(team_id: int, user: Any, key: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()[:40]
    return f"fp:idem:{team_id}:{getattr(user, 'pk', None) or 0}:{digest}"


def _remembered(slot: str | None, team_id: int, input_key: str) -> Sweep | None:
    if slot is None:
        return None
    record = cache.get(slot)
    if not isinstance(record, dict) or not isinstance(record.get("sweep"), int):
        return None
    sweep = Sweep.objects.filter(pk=int(record["sweep"]), team_id=team_id).first()
    if sweep is None:
        return None
    if record.get("input") != input_key:
        raise Conflict({"detail": [f"this {IDEMPOTENCY_HEADER} was used for a different request (sweep {sweep.pk}); "
                                   "use a new key for new input"]})
    return sweep


def _active_twin(keys: list[str]) -> Sweep | None:
    run = (SimulationRun.objects.filter(idempotency_key__in=keys, status__in=ACTIVE_STATUSES, sweep__isnull=False)
           .select_related("sweep").order_by("pk").first())
    return run.sweep if run is not None else None


def child_keys(input_key: str, count: int) -> list[str]:
    """The idempotency keys of a request's children: unique among active runs (one active twin at most)."""
    return [f"sweep:{input_key}:{i}" for i in range(count)]


def find_submitted(*, team_id: int, user: Any, input_key: str, count: int, idempotency_key: str | None) -> Sweep | None:
    """The sweep this request already made: remembered under its ``Idempotency-Key``, or an active twin with the
    same input (marked ``reused``); None when there is none. A cheap look-up before the children are validated."""
    slot = _remembered_key(team_id, user, idempotency_key) if idempotency_key else None
    existing = _remembered(slot, team_id, input_key) or _active_twin(child_keys(input_key, count))
    if existing is not None:
        existing.reused = True  # type: ignore[attr-defined]
    return existing


def submit_children(*, team: Any, user: Any, input_key: str, count: int, idempotency_key: str | None,
                    create: Callable[[list[str]], Sweep]) -> Sweep:
    """Create a sweep of ``count`` children (``create(child_keys)`` inserts them) exactly once: the team's share,
    the ``Idempotency-Key`` and identical active input are checked under the team's lock; a twin inserted by a
    concurrent request makes the insert fail (unique index) and this request answer the twin. The sweep carries
    ``reused``."""
    keys = child_keys(input_key, count)
    slot = _remembered_key(team.pk, user, idempotency_key) if idempotency_key else None
    for _ in range(3):
        try:
            with transaction.atomic():
                lock_team(team.pk)
                existing = find_submitted(team_id=team.pk, user=user, input_key=input_key, count=count,
                                          idempotency_key=idempotency_key)
                if existing is not None:
                    return existing
                admit(team_id=team.pk, runs=count)
                sweep = create(keys)
                if slot is not None:  # the database cache writes inside this transaction; Redis at once
                    cache.set(slot, {"sweep": sweep.pk, "input": input_key}, limits.idempotency_ttl_s())
        except IntegrityError:
            continue  # an identical request inserted its children first: the next pass answers them
        sweep.reused = False  # type: ignore[attr-defined]
        return sweep
    raise ValidationError({"detail": ["identical submissions kept colliding; try again"]})


def sweep_submit(
    *, scenario: Scenario, axes: Mapping[str, Any], user: Any, kind: str = RunKind.TCO, name: str = "",
    params: Mapping[str, Any] | None = None, idempotency_key: str | None = None,
) -> Sweep:
    """Expand ``axes`` over the scenario into child runs and fan them out on the simulations queue (once: see
    :func:`submit_children`; ``reused`` says whether an identical active or remembered sweep answered)."""
    check_kind(kind)
    idempotency_key = clean_idempotency_key(idempotency_key)
    combos = sweep_expand(axes=axes)  # raises before anything is created
    cleaned = clean_params(kind, params)
    run_params = [clean_params(kind, {**cleaned, **{p[len(PARAMS_AXIS):]: v for p, v in combo.items()
                                                   if p.startswith(PARAMS_AXIS)}}) for combo in combos]
    doc_combos = [{p: v for p, v in combo.items() if not p.startswith(PARAMS_AXIS)} for combo in combos]
    base, version, values = planning.scenario_resolve(scenario=scenario)
    input_key = input_hash(kind=kind, document=base, catalog=values,
                           params={"scenario": scenario.pk, "axes": dict(axes), "params": cleaned})
    existing = find_submitted(team_id=scenario.team_id, user=user, input_key=input_key, count=len(combos),
                              idempotency_key=idempotency_key)
    if existing is not None:  # a retry, or a twin of an active sweep: no validation, nothing written
        return existing
    docs, parsed = _combination_documents(base, doc_combos, values)  # nothing invalid reaches a worker
    admit_children(kind=kind, combos=combos, parsed=parsed, run_params=run_params, catalog=values)

    def create(keys: list[str]) -> Sweep:
        sweep = Sweep.objects.create(
            team=scenario.team, created_by=user, updated_by=user, scenario=scenario, kind=kind,
            name=name or f"{scenario.name} sweep", axes=dict(axes), total_runs=len(combos),
        )
        runs = [run_build(team=scenario.team, user=user, kind=kind, document=doc, version=version, values=values,
                          scenario=scenario, params=run_param, trigger=RunTrigger.SWEEP, sweep=sweep, overrides=combo,
                          label=", ".join(f"{p.split('.')[-1]}={v}" for p, v in combo.items()), idempotency_key=key)
                for combo, doc, run_param, key in zip(combos, docs, run_params, keys, strict=True)]
        created = SimulationRun.objects.bulk_create(runs)
        dispatch.enqueue_runs([r.pk for r in created], sweep_id=sweep.pk)
        return sweep

    return submit_children(team=scenario.team, user=user, input_key=input_key, count=len(combos),
                           idempotency_key=idempotency_key, create=create)


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
            row["metrics"] = metrics.values(run.result, metrics.SWEEP)
            row["fits"] = run_fits(run) is not False
        elif run.error:
            row["error"] = run.error
        rows.append(row)
    best: dict[str, Any] = {}
    for spec in metrics.BEST:
        metric, lowest = spec.key, bool(spec.lower_is_better)
        # a run that does not fit in GPU memory is not a plan: it never wins
        scored = sorted((r for r in rows if r.get("fits", True) and r.get("metrics", {}).get(metric) is not None),
                        key=lambda r, m=metric: (r["metrics"][m], r["run"]))  # type: ignore[misc]
        if scored:
            pick = scored[0] if lowest else scored[-1]
            best[metric] = {"run": pick["run"], "value": pick["metrics"][metric], "overrides": pick["overrides"]}
    not_fitting = [r["run"] for r in rows if r.get("fits") is False]
    summary = {"counts": counts, "total": total, "best": best, "runs": rows, "not_fitting": not_fitting}
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
