"""Scheduled re-evaluation of watched scenarios and the diff of what changed."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import ValidationError
from planning import services as planning
from planning.models import CatalogVersion, Scenario
from simulations import metrics
from simulations.models import ReEvaluation, RunKind, RunStatus, RunTrigger, SimulationRun
from simulations.reports import run_fits, run_metrics
from simulations.services import dispatch
from simulations.services.hashing import engine_version, input_hash
from simulations.services.reevaluation_plans import plan_reevaluated, plan_run_diff, reevaluate_watched_plans
from simulations.services.runs import run_create

logger = logging.getLogger(__name__)


def _reevaluation_key(*, scenario: Scenario, hash_: str, version: CatalogVersion | None) -> str:
    return f"reeval:{scenario.pk}:{hash_}:{version.pk if version else 0}:{engine_version()}"


def _calibration_label(section: Any) -> str:
    """'<profile name> v<version>' of a document's calibration section (issue #16), 'none' without one."""
    if not isinstance(section, Mapping):
        return "none"
    return f"{section.get('name') or 'profile'} v{section.get('version')}"


def _study_label(section: Any) -> str:
    """'run #<id>' of a document's pinned fabric study (issue #13), 'none' without one."""
    if not isinstance(section, Mapping) or not section:
        return "none"
    return f"run #{section.get('run')}" if section.get("run") is not None else "pinned study"


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
    cal_then, cal_now = (snap.get("document") or {}).get("calibration"), document.get("calibration")
    if _calibration_label(cal_then) != _calibration_label(cal_now):
        reasons.append(f"calibration {_calibration_label(cal_then)} → {_calibration_label(cal_now)}")
    study_then, study_now = (snap.get("document") or {}).get("fabric_study"), document.get("fabric_study")
    if _study_label(study_then) != _study_label(study_now):  # a fabric study pinned or unpinned (issue #13)
        reasons.append(f"fabric study {_study_label(study_then)} → {_study_label(study_now)}")
    if not reasons and last.input_hash != input_hash(kind=last.kind, document=document, catalog=values,
                                                     params=last.params):
        reasons.append("scenario inputs changed")
    return bool(reasons), reasons, last


def reevaluate_watched(*, scenario_ids: list[int] | None = None,
                       plan_ids: list[int] | None = None) -> list[ReEvaluation]:
    """Re-run watched scenarios (and watched capacity plans, issue #14) whose inputs moved. Each change is
    re-evaluated once (unique key). Given only ``scenario_ids``, plans are left alone (and vice versa)."""
    created: list[ReEvaluation] = []
    qs = Scenario.objects.filter(watched=True).select_related("fleet", "workload", "catalog", "pinned_version", "team")
    if scenario_ids is None and plan_ids is not None:
        qs = qs.none()
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
                dispatch.enqueue_runs([run.pk])
            created.append(reeval)
        except IntegrityError:
            continue  # another beat already re-evaluated this change
        except (ValueError, ValidationError) as exc:
            logger.warning("re-evaluation of scenario %s skipped: %s", scenario.pk, exc)
    if plan_ids is not None or scenario_ids is None:
        created += reevaluate_watched_plans(plan_ids=plan_ids)
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


def _leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "—"
    if isinstance(value, int | float):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.6g}"
    return str(value)


def document_changes(before: Mapping[str, Any], after: Mapping[str, Any], limit: int = 6) -> list[str]:
    """Which inputs moved, in planner words: ``servers 128 → 160 (1,024 → 1,280 GPUs)``, ``cluster.nic_gbps 400 → 800``."""
    a, b = _leaves(before), _leaves(after)
    notes: list[str] = []
    gpus = ("cluster.gpus", "cluster.gpus_per_node")
    if a.get(gpus[0]) != b.get(gpus[0]) and a.get(gpus[1]) == b.get(gpus[1]) and a.get(gpus[1]):
        per = a[gpus[1]]
        with contextlib.suppress(TypeError, ZeroDivisionError):
            notes.append(f"servers {_show(a[gpus[0]] / per)} → {_show(b[gpus[0]] / per)} "
                         f"({_show(a[gpus[0]])} → {_show(b[gpus[0]])} GPUs)")
    for path in sorted(set(a) | set(b)):
        if a.get(path) == b.get(path) or (notes and path == gpus[0]) or path in ("name", "description"):
            continue
        notes.append(f"{path} {_show(a.get(path))} → {_show(b.get(path))}")
    return notes[:limit] + ([f"+{len(notes) - limit} more inputs"] if len(notes) > limit else [])


def run_diff(*, previous: SimulationRun | None, new: SimulationRun) -> tuple[dict[str, Any], str]:
    """Per-metric changes between two runs and a one-line human summary of why."""
    if new.kind == RunKind.FLEET:  # capacity plans speak in shortfall days and deadlines (issue #14)
        moved = [] if previous is None else _catalog_changes(previous.input_snapshot.get("catalog_values", {}),
                                                             new.input_snapshot.get("catalog_values", {}))
        return plan_run_diff(previous=previous, new=new, catalog_causes=moved)
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
            causes += document_changes(previous.input_snapshot.get("document") or {},
                                       new.input_snapshot.get("document") or {}) or ["cluster/workload inputs changed"]
        if previous.engine_version != new.engine_version:
            causes.append(f"engine {previous.engine_version} → {new.engine_version}")
    headline: list[str] = []
    for spec in metrics.REEVALUATION:
        label = spec.reevaluation
        pct = next((changes[p].get("delta_pct") for p in spec.paths if p in changes), None)
        if pct is not None and abs(pct) >= 0.05 and not any(h.startswith(label + " ") for h in headline):
            headline.append(f"{label} {pct:+.1f}%")
    text = "first evaluation" if previous is None else ", ".join(headline) or "no material change"
    if run_fits(new) is False:  # an impossible result says so first, wherever it is shown
        text = "DOES NOT FIT in GPU memory (not a feasible plan) — " + text
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
        if reeval.scenario_id is not None:
            Scenario.objects.filter(pk=reeval.scenario_id).update(last_evaluated_at=timezone.now(),
                                                                  last_evaluated_hash=run.input_hash)
        plan_reevaluated(reeval=reeval, run=run)
        if webhook:
            dispatch.enqueue_webhook(reeval.pk)
    reeval.refresh_from_db()
    return reeval
