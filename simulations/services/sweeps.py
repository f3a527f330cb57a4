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
from rest_framework import exceptions

from planning import services as planning
from planning.models import Scenario
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun, Sweep
from simulations.services import dispatch
from simulations.services.params import check_kind, clean_params
from simulations.services.runs import run_create

# "params.<option>" axes vary a run option instead of the document (fabric studies: params.routing,
# params.placement), e.g. {"params.routing": ["ecmp", "adaptive"], "cluster.oversubscription": [1, 2]}
PARAMS_AXIS = "params."
SWEEP_AXIS_SECTIONS = (*planning.DOCUMENT_SECTIONS, "params")
KEY_METRICS = (
    "step_time_s", "tokens_per_s", "mfu", "time_to_train_days", "network_wait_fraction",
    "tco.usd_per_gpu_hour", "tco.run_cost_usd", "tco.usd_per_million_tokens", "tco.capex_usd",
    "tco.annual_tco_usd", "efficiency.p10", "efficiency.p50", "efficiency.p90",
)


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
    check_kind(kind)
    combos = sweep_expand(axes=axes)  # raises before anything is created
    cleaned = clean_params(kind, params)
    run_params = [clean_params(kind, {**cleaned, **{p[len(PARAMS_AXIS):]: v for p, v in combo.items()
                                                   if p.startswith(PARAMS_AXIS)}}) for combo in combos]
    base, version, values = planning.scenario_resolve(scenario=scenario)
    with transaction.atomic():
        sweep = Sweep.objects.create(
            team=scenario.team, created_by=user, updated_by=user, scenario=scenario, kind=kind,
            name=name or f"{scenario.name} sweep", axes=dict(axes), total_runs=len(combos),
        )
        ids = []
        for combo, run_param in zip(combos, run_params, strict=True):
            doc = json.loads(json.dumps(base))
            for path, value in combo.items():
                if not path.startswith(PARAMS_AXIS):
                    planning.set_path(doc, path, value)
            label = ", ".join(f"{p.split('.')[-1]}={v}" for p, v in combo.items())
            run = run_create(team=scenario.team, user=user, kind=kind, document=doc, version=version,
                             values=values, scenario=scenario, params=run_param, trigger=RunTrigger.SWEEP,
                             sweep=sweep, overrides=combo, label=label)
            ids.append(run.pk)
        dispatch.enqueue_runs(ids, sweep_id=sweep.pk)
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
                           ("time_to_train_days", True), ("mfu", False), ("efficiency.p50", False)):
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
