"""Sweeps: expand axes into child runs, fan them out, and aggregate their results."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from core.errors import ValidationError
from engine.errors import ScenarioError
from engine.schema.bounds import MAX_SWEEP_AXES, bound_for, check_field
from planning import services as planning
from planning.models import Scenario
from simulations import metrics
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun, Sweep
from simulations.reports import run_fits
from simulations.services import dispatch
from simulations.services.params import check_kind, clean_params
from simulations.services.runs import run_create

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
    limit = int(getattr(settings, "FP_MAX_SWEEP_RUNS", 512))
    if total > limit:
        raise ValidationError(
            {"axes": [f"expands to {total} runs, more than the limit FP_MAX_SWEEP_RUNS={limit}"]}
        )
    for name in names:  # every value is one scenario value of its field's type and bound
        bad = [msg for msg in (_axis_value_error(str(name), v) for v in axes[name]) if msg]
        if bad:
            errors[f"axes.{name}"] = bad[:5]
    if errors:
        raise ValidationError(errors)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]


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
) -> list[dict[str, Any]]:
    """The document of every combination, each validated by the engine's parser before anything is created."""
    docs: list[dict[str, Any]] = []
    errors: dict[str, list[str]] = {}
    for combo in combos:
        doc = json.loads(json.dumps(base))
        for path, value in combo.items():
            planning.set_path(doc, path, value)
        try:
            planning.document_validate(document=doc, catalog=catalog)
        except ValidationError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {"detail": exc.detail}
            field, messages = next(iter(detail.items()))
            message = str(messages[0] if isinstance(messages, list) and messages else messages)
            axis = next((p for p in combo if str(field) == p or str(field).startswith(p + ".")), None)
            label = ", ".join(f"{p}={_short(v)}" for p, v in combo.items())
            errors.setdefault(f"axes.{axis}" if axis else "axes", []).append(f"{label}: {field}: {message}")
            if sum(len(v) for v in errors.values()) >= 5:
                break
        docs.append(doc)
    if errors:
        raise ValidationError(errors)
    return docs


def sweep_submit(
    *, scenario: Scenario, axes: Mapping[str, Any], user: Any, kind: str = RunKind.TCO, name: str = "",
    params: Mapping[str, Any] | None = None,
) -> Sweep:
    """Expand ``axes`` over the scenario into child runs and fan them out on the simulations queue."""
    check_kind(kind)
    combos = sweep_expand(axes=axes)  # raises before anything is created
    cleaned = clean_params(kind, params)
    run_params = [clean_params(kind, {**cleaned, **{p[len(PARAMS_AXIS):]: v for p, v in combo.items()
                                                   if p.startswith(PARAMS_AXIS)}}) for combo in combos]
    doc_combos = [{p: v for p, v in combo.items() if not p.startswith(PARAMS_AXIS)} for combo in combos]
    base, version, values = planning.scenario_resolve(scenario=scenario)
    docs = _combination_documents(base, doc_combos, values)  # nothing invalid reaches a worker
    with transaction.atomic():
        sweep = Sweep.objects.create(
            team=scenario.team, created_by=user, updated_by=user, scenario=scenario, kind=kind,
            name=name or f"{scenario.name} sweep", axes=dict(axes), total_runs=len(combos),
        )
        ids = []
        for combo, doc, run_param in zip(combos, docs, run_params, strict=True):
            label = ", ".join(f"{p.split('.')[-1]}={v}" for p, v in combo.items())
            run = run_create(team=scenario.team, user=user, kind=kind, document=doc, version=version,
                             values=values, scenario=scenario, params=run_param, trigger=RunTrigger.SWEEP,
                             sweep=sweep, overrides=combo, label=label)
            ids.append(run.pk)
        dispatch.enqueue_runs(ids, sweep_id=sweep.pk)
    return sweep


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
