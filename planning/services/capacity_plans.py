"""Capacity plans (issue #14): a fleet over time against a demand plan; created, updated and deleted here.

The plan ``document`` is validated by the engine's plan parser (:func:`engine.fleet.parse_plan`)
on every write, so a stored plan always parses; errors name the field inside the document
(``document.clusters[1].gpus``). Every write is change-logged in its transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from accounts.models import Team
from core.errors import ValidationError, engine_error
from engine.errors import ScenarioError
from engine.fleet.plan import parse_plan
from planning import changelog
from planning.models import CapacityPlan, Catalog, Fleet, ObjectChange, Workload
from planning.services.catalogs import catalog_resolve
from planning.services.common import _err, _update_logged
from planning.services.documents import fleet_cluster
from planning.services.imports import MAX_CSV_ROWS, iter_csv

CAPACITY_PLAN_FIELDS = ("name", "description", "document", "cluster_fleets", "watched", "catalog")
# The cluster keys a fleet decides; everything else of a plan cluster (name, in_service_day, retire_day,
# reserved_gpus, pod_gpus, costs) stays the plan's own.
FLEET_KEYS = ("gpu", "gpus", "gpus_per_node", "nics_per_node", "nic_gbps", "fabric", "topology", "oversubscription")


def _fleets_of(team_id: int, cluster_fleets: Mapping[str, Any]) -> dict[str, Fleet]:
    ids = {v for v in cluster_fleets.values() if isinstance(v, int) and not isinstance(v, bool)}
    by_id = {f.pk: f for f in Fleet.objects.filter(team_id=team_id, pk__in=ids)}
    return {name: by_id[fid] for name, fid in cluster_fleets.items() if fid in by_id}


def capacity_plan_resolve(*, plan: CapacityPlan, document: Mapping[str, Any] | None = None,
                          cluster_fleets: Mapping[str, Any] | None = None,
                          catalog: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The plan document a run simulates: each cluster linked to a fleet takes the fleet's GPU type, GPU count,
    NICs, fabric, topology and oversubscription as the fleet is now (so a fleet change moves the plan)."""
    doc = dict(plan.document if document is None else document)
    links = _fleets_of(plan.team_id, plan.cluster_fleets if cluster_fleets is None else cluster_fleets)
    if links:
        clusters = []
        for c in doc.get("clusters") or []:
            fleet = links.get(str(c.get("name"))) if isinstance(c, Mapping) else None
            if fleet is not None:
                fc = fleet_cluster(fleet=fleet, catalog=catalog)
                c = {**c, **{k: fc[k] for k in FLEET_KEYS if k in fc}}
            clusters.append(c)
        doc["clusters"] = clusters
    return doc


def _clean_links(team_id: int, value: Any, document: Mapping[str, Any]) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise _err("cluster_fleets", "must be an object {cluster name: fleet id}")
    names = {c.get("name") for c in document.get("clusters") or [] if isinstance(c, Mapping)}
    out: dict[str, int] = {}
    for name, fid in value.items():
        if name not in names:
            raise ValidationError({f"cluster_fleets.{name}"[:120]: ["no cluster of the plan has this name"]})
        if isinstance(fid, bool) or not isinstance(fid, int) or not Fleet.objects.filter(team_id=team_id,
                                                                                       pk=fid).exists():
            raise ValidationError({f"cluster_fleets.{name}"[:120]: [f"fleet {str(fid)[:20]} not found"]})
        out[str(name)] = fid
    return out


def capacity_plan_validate(document: Any) -> None:
    """The engine parser's checks (types, bounds, keys, cross-references, catalog keys) as field errors."""
    if not isinstance(document, Mapping):
        raise _err("document", "must be a JSON object (the plan document, see docs/fleet-model.md)")
    try:
        parse_plan(document)
    except ScenarioError as exc:
        raise engine_error(exc, f"document.{exc.field}" if exc.field else "document") from None


def _clean(data: Mapping[str, Any], *, creating: bool, team_id: int,
           current: CapacityPlan | None = None) -> dict[str, Any]:
    out = {k: v for k, v in data.items() if k in CAPACITY_PLAN_FIELDS}
    if "watched" in out and not isinstance(out["watched"], bool):
        raise _err("watched", "must be true or false")
    if out.get("catalog") is not None and (not isinstance(out["catalog"], Catalog)
                                           or out["catalog"].team_id not in (None, team_id)):
        raise _err("catalog", "catalog not found")
    if creating or "name" in out:
        name = out.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _err("name", "This field is required.")
        if len(name) > 120:
            raise _err("name", "at most 120 characters")
    if "description" in out and not isinstance(out["description"], str):
        raise _err("description", "must be a string")
    if creating and "document" not in out:
        raise _err("document", "This field is required.")
    if "document" in out and not isinstance(out["document"], Mapping):
        capacity_plan_validate(out["document"])
    document = out.get("document", current.document if current is not None else {})
    if "cluster_fleets" in out or ("document" in out and current is not None and current.cluster_fleets):
        links = out.get("cluster_fleets", current.cluster_fleets if current is not None else {})
        out["cluster_fleets"] = _clean_links(team_id, links, document)
    if "document" in out or "cluster_fleets" in out or "catalog" in out:
        catalog = out.get("catalog", current.catalog if current is not None else None)
        probe = CapacityPlan(team_id=team_id, document=document,
                             cluster_fleets=out.get("cluster_fleets", current.cluster_fleets if current else {}) or {})
        capacity_plan_validate(capacity_plan_resolve(plan=probe, catalog=catalog_resolve(catalog=catalog)[1]))
    return out


def capacity_plan_create(*, team: Team, user: Any, **fields: Any) -> CapacityPlan:
    data = _clean(fields, creating=True, team_id=team.pk)
    with transaction.atomic():
        plan = CapacityPlan.objects.create(team=team, created_by=user, updated_by=user, **data)
        changelog.record(obj=plan, object_type="capacity_plan", action=ObjectChange.Action.CREATE, user=user)
    return plan


def capacity_plan_update(*, plan: CapacityPlan, user: Any, **fields: Any) -> CapacityPlan:
    data = _clean(fields, creating=False, team_id=plan.team_id, current=plan)
    _update_logged(plan, object_type="capacity_plan", user=user, data=data)
    return plan


def capacity_plan_delete(*, plan: CapacityPlan, user: Any) -> None:
    """Delete a plan; its runs stay (they hold their own input snapshot)."""
    with transaction.atomic():
        changelog.record(obj=plan, object_type="capacity_plan", action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(plan))
        plan.delete()


JOB_COLUMNS = ("name", "team", "gpus", "duration_days", "workload", "submit_day", "deadline_day", "priority",
               "cluster")
_NUMBER_COLUMNS = {"gpus": int, "duration_days": float, "submit_day": float, "deadline_day": float, "priority": int}


def _job_from_row(row: dict[str, str], workloads: dict[str, Workload]) -> dict[str, Any]:
    unknown = sorted(set(row) - set(JOB_COLUMNS))
    if unknown:
        raise ValidationError({unknown[0]: [f"unknown column; allowed: {', '.join(JOB_COLUMNS)}"]})
    job: dict[str, Any] = {}
    for key, raw in row.items():
        value = (raw or "").strip()
        if not value:
            continue
        if key == "workload":
            w = workloads.get(value)
            if w is None:
                raise ValidationError({"workload": [f"no workload of this team is called {value!r}"]})
            job["workload"] = {"model": w.model, "training": w.training, "parallelism": w.parallelism}
        elif key == "gpus" and value == "auto":
            job["gpus"] = "auto"
        elif key in _NUMBER_COLUMNS:
            try:
                number = float(value)
            except ValueError:
                raise ValidationError({key: [f"must be a number, got {value[:40]!r}"]}) from None
            if _NUMBER_COLUMNS[key] is int and not number.is_integer():
                raise ValidationError({key: [f"must be an integer, got {value[:40]!r}"]})
            job[key] = int(number) if _NUMBER_COLUMNS[key] is int else number
        else:
            job[key] = value
    return job


def capacity_plan_import_jobs(*, plan: CapacityPlan, user: Any, file: Any, replace: bool = True) -> CapacityPlan:
    """The plan's named jobs from a demand-plan CSV (columns: name, team, gpus, duration_days | workload,
    submit_day, deadline_day, priority, cluster). ``workload`` names one of the team's workloads: its model,
    training (token budget) and parallelism become the job's, so the engine predicts its run time on each
    cluster. All or nothing: conversion errors per line, then the whole document through the plan parser."""
    workloads = {w.name: w for w in Workload.objects.filter(team_id=plan.team_id)}
    jobs: list[dict[str, Any]] = []
    errors: dict[str, Any] = {}
    for line, row in iter_csv(file):
        if len(jobs) >= MAX_CSV_ROWS:
            raise _err("file", f"at most {MAX_CSV_ROWS:,} rows")
        try:
            jobs.append(_job_from_row(row, workloads))
        except ValidationError as exc:
            errors[str(line)] = exc.detail
    if errors:
        raise ValidationError({"rows": errors})
    if not jobs:
        raise _err("file", "has no data rows")
    document = dict(plan.document)
    document["jobs"] = jobs if replace else [*(document.get("jobs") or []), *jobs]
    return capacity_plan_update(plan=plan, user=user, document=document)
