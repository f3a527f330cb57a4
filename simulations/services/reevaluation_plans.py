"""Scheduled re-evaluation of watched capacity plans (issue #14), on the scenarios' machinery.

The same beat task (``simulations.reevaluate_watched``), the same :class:`ReEvaluation` rows (``capacity_plan``
set, ``scenario`` empty) with their unique idempotency key, the same completion hook and webhook. A plan is
re-run when the default catalog's version, a fleet one of its clusters stands for, or the engine changed since its
last finished run; the diff speaks in planner terms ("first shortfall moves from day 214 to day 188, deadlines
missed 0 → 2: cluster h100-west gpus 16,384 → 12,288").
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import ValidationError
from planning.models import CapacityPlan, Fleet
from planning.services.capacity_plans import capacity_plan_resolve
from planning.services.catalogs import catalog_resolve
from simulations.models import ReEvaluation, RunKind, RunStatus, RunTrigger, SimulationRun
from simulations.services.capacity_plans import capacity_plan_submit, plan_runs
from simulations.services.hashing import engine_version, input_hash
from simulations.services.plan_compare import plan_changes, plan_input_changes

logger = logging.getLogger(__name__)


def plan_needs_reevaluation(*, plan: CapacityPlan) -> tuple[bool, list[str], SimulationRun | None]:
    """Has the default catalog version, a linked fleet, the engine or the plan changed since its last run?"""
    last = plan_runs(plan).filter(sweep__isnull=True, status=RunStatus.SUCCEEDED).first()
    if last is None:
        return True, ["never evaluated"], None
    version, values = catalog_resolve(catalog=plan.catalog)
    snap = last.input_snapshot or {}
    reasons: list[str] = []
    if (version.pk if version else None) != (snap.get("catalog") or {}).get("version_id"):
        reasons.append(f"catalog version v{(snap.get('catalog') or {}).get('version')} → "
                       f"v{version.number if version else '?'}")
    then = ((snap.get("capacity_plan") or {}).get("fleets")) or {}
    now = {str(f.pk): f for f in Fleet.objects.filter(team_id=plan.team_id,
                                                       pk__in=list((plan.cluster_fleets or {}).values()))}
    for fid in sorted(set(then) | set(now)):
        if fid not in now:
            reasons.append(f"fleet {then[fid].get('name')} no longer used")
        elif fid not in then:
            reasons.append(f"fleet {now[fid].name} now used")
        elif then[fid].get("updated_at") != now[fid].updated_at.isoformat():
            reasons.append(f"fleet {now[fid].name} changed")
    if last.engine_version != engine_version():
        reasons.append(f"engine {last.engine_version} → {engine_version()}")
    if not reasons:
        document = capacity_plan_resolve(plan=plan, catalog=values)
        if last.input_hash != input_hash(kind=RunKind.FLEET, document=document, catalog=values, params=last.params):
            reasons.append("plan inputs changed")
    return bool(reasons), reasons, last


def reevaluate_watched_plans(*, plan_ids: list[int] | None = None) -> list[ReEvaluation]:
    """Re-run watched plans whose inputs moved; each change once (unique key), like watched scenarios."""
    created: list[ReEvaluation] = []
    qs = CapacityPlan.objects.filter(watched=True).select_related("team")
    if plan_ids is not None:
        qs = qs.filter(pk__in=plan_ids)
    for plan in qs.order_by("pk"):
        try:
            needed, reasons, last = plan_needs_reevaluation(plan=plan)
            if not needed:
                continue
            version, values = catalog_resolve(catalog=plan.catalog)
            params = last.params if last is not None else {}
            document = capacity_plan_resolve(plan=plan, catalog=values)
            hash_ = input_hash(kind=RunKind.FLEET, document=document, catalog=values, params=params)
            key = f"reeval-plan:{plan.pk}:{hash_}:{version.pk if version else 0}:{engine_version()}"
            with transaction.atomic():
                reeval = ReEvaluation.objects.create(team=plan.team, capacity_plan=plan, previous_run=last,
                                                     reasons=reasons, idempotency_key=key)
                run = capacity_plan_submit(plan=plan, user=None, params=params, force=True,
                                           trigger=RunTrigger.REEVALUATION)
                run.label = f"Capacity plan: {plan.name} (re-evaluation)"[:200]
                run.save(update_fields=["label"])
                reeval.new_run = run
                reeval.save(update_fields=["new_run"])
            created.append(reeval)
        except IntegrityError:
            continue  # another beat already re-evaluated this change
        except (ValueError, ValidationError) as exc:
            logger.warning("re-evaluation of capacity plan %s skipped: %s", plan.pk, exc)
    return created


def plan_run_diff(*, previous: SimulationRun | None, new: SimulationRun,
                  catalog_causes: list[str] | None = None) -> tuple[dict[str, Any], str]:
    """How a plan's figures moved between two runs, and why, in one line (``catalog_causes``: the catalog
    changes between the two snapshots, worded by the scenarios' re-evaluation diff)."""
    changes, words = plan_changes(previous.result if previous is not None else None, new.result)
    if previous is None:
        return changes, "first evaluation"
    text = ", ".join(words) or "no material change"
    snap_a, snap_b = previous.input_snapshot or {}, new.input_snapshot or {}
    causes = list(catalog_causes or [])
    causes += plan_input_changes(snap_a.get("document") or {}, snap_b.get("document") or {})
    if previous.engine_version != new.engine_version:
        causes.append(f"engine {previous.engine_version} → {new.engine_version}")
    if causes:
        text += ": " + "; ".join(causes[:5]) + (f" (+{len(causes) - 5} more)" if len(causes) > 5 else "")
    return changes, text


def plan_reevaluated(*, reeval: ReEvaluation, run: SimulationRun) -> None:
    """Stamp the plan as evaluated (the completion hook calls this for a plan's re-evaluation)."""
    if reeval.capacity_plan_id is not None:
        CapacityPlan.objects.filter(pk=reeval.capacity_plan_id).update(last_evaluated_at=timezone.now())
