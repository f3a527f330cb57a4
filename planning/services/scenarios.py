"""Scenarios: create, update, delete, resolve to an engine document, and the builder's one-step save."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from accounts.models import Team
from core.errors import ValidationError
from engine.schema.types import ScenarioSpec
from planning import changelog
from planning.models import CatalogVersion, Fleet, ObjectChange, Scenario, Workload
from planning.services.calibration import scenario_calibration
from planning.services.catalogs import catalog_default, catalog_resolve
from planning.services.common import SCENARIO_FIELDS, _err, _update_logged
from planning.services.documents import build_document, document_validate
from planning.services.workloads import _validate_workload, workload_create, workload_update


def _validate_scenario(*, team_id: int, data: Mapping[str, Any], current: Scenario | None = None) -> None:
    """Cross-object checks: related objects in the same team (others answer 'not found'), pin in catalog."""
    errors: dict[str, list[str]] = {}
    if "name" in data and not str(data["name"] or "").strip():
        errors["name"] = ["This field is required."]
    for f in ("fleet", "workload", "calibration_fleet"):
        obj = data.get(f)
        if obj is not None and obj.team_id != team_id:
            errors[f] = [f"{f} {obj.pk} not found"]
    catalog = data.get("catalog", current.catalog if current else None)
    if catalog is not None and catalog.team_id not in (None, team_id):
        errors["catalog"] = [f"catalog {catalog.pk} not found"]
    pin = data.get("pinned_version", current.pinned_version if current else None)
    if pin is not None:
        expected = catalog.pk if catalog is not None else getattr(catalog_default(), "pk", None)
        if pin.catalog_id != expected:
            errors["pinned_version"] = ["must be a version of the scenario's catalog"]
    for f in ("cluster", "costs", "uncertainty", "fabric_study"):
        if f in data and data[f] is not None and not isinstance(data[f], dict):
            errors[f] = ["must be a JSON object"]
    fleet = data.get("fleet", current.fleet if current else None)
    cluster = data.get("cluster", current.cluster if current else {})
    if fleet is None and not cluster:
        errors["cluster"] = ["give a fleet or an ad-hoc cluster"]
    if errors:
        raise ValidationError(errors)


@dataclass(frozen=True)
class _CheckedDocument:
    """A resolved document the engine's parser accepted (with its catalog values), and what it parsed to."""

    document: dict[str, Any]
    catalog: dict[str, dict[str, Any]]
    parsed: ScenarioSpec


def _validate_scenario_document(
    *, data: Mapping[str, Any], current: Scenario | None = None, checked: _CheckedDocument | None = None
) -> _CheckedDocument | None:
    """The scenario's resolved document (workload + fleet/cluster + costs + catalog) must be valid.

    Parsed once per save: ``checked``, what an earlier check of the same save accepted, stands when the document
    and the catalog values it resolves to now are the same (a catalog or scenario changed in between is
    parsed again). Returns what was checked (None without a workload: nothing to check yet).
    """
    workload = data.get("workload", current.workload if current else None)
    if workload is None:
        return None
    catalog = data.get("catalog", current.catalog if current else None)
    pin = data.get("pinned_version", current.pinned_version if current else None)
    _, values = catalog_resolve(catalog=catalog, pinned_version=pin)
    doc = build_document(
        workload=workload,
        fleet=data.get("fleet", current.fleet if current else None),
        cluster=data.get("cluster", current.cluster if current else None),
        costs=data.get("costs", current.costs if current else None),
        uncertainty=data.get("uncertainty", current.uncertainty if current else None),
        catalog=values,
    )
    study = data.get("fabric_study", current.fabric_study if current else None)
    if study:  # a pinned fabric study (issue #13) is checked with the document it will travel in
        doc["fabric_study"] = study
    if checked is not None and checked.document == doc and checked.catalog == values:
        return checked
    return _CheckedDocument(doc, values, document_validate(document=doc, catalog=values or None))


def scenario_create(*, team: Team, user: Any, **fields: Any) -> Scenario:
    return _scenario_create(team=team, user=user, fields=fields)


def _scenario_create(
    *, team: Team, user: Any, fields: Mapping[str, Any], checked: _CheckedDocument | None = None
) -> Scenario:
    data = {k: v for k, v in fields.items() if k in SCENARIO_FIELDS}
    if not data.get("name"):
        raise _err("name", "This field is required.")
    if data.get("workload") is None:
        raise _err("workload", "This field is required.")
    for f in ("cluster", "costs", "uncertainty", "fabric_study"):
        if data.get(f) is None:
            data[f] = {}
    _validate_scenario(team_id=team.pk, data=data)
    _validate_scenario_document(data=data, checked=checked)
    with transaction.atomic():
        scenario = Scenario.objects.create(team=team, created_by=user, updated_by=user, **data)
        changelog.record(obj=scenario, object_type="scenario", action=ObjectChange.Action.CREATE, user=user)
    return scenario


def scenario_update(*, scenario: Scenario, user: Any, **fields: Any) -> Scenario:
    return _scenario_update(scenario=scenario, user=user, fields=fields)


def _scenario_update(
    *, scenario: Scenario, user: Any, fields: Mapping[str, Any], checked: _CheckedDocument | None = None
) -> Scenario:
    data = {k: v for k, v in fields.items() if k in SCENARIO_FIELDS}
    for f in ("cluster", "costs", "uncertainty", "fabric_study"):
        if f in data and data[f] is None:
            data[f] = {}
    _validate_scenario(team_id=scenario.team_id, data=data, current=scenario)
    _validate_scenario_document(data=data, current=scenario, checked=checked)
    _update_logged(scenario, object_type="scenario", user=user, data=data)
    return scenario


def scenario_delete(*, scenario: Scenario, user: Any) -> None:
    with transaction.atomic():
        changelog.record(obj=scenario, object_type="scenario", action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(scenario))
        scenario.delete()


def scenario_resolve(
    *, scenario: Scenario
) -> tuple[dict[str, Any], CatalogVersion | None, dict[str, dict[str, Any]]]:
    """(engine document, catalog version used, catalog values) for a scenario, right now."""
    version, values = catalog_resolve(catalog=scenario.catalog, pinned_version=scenario.pinned_version)
    doc = build_document(
        workload=scenario.workload, fleet=scenario.fleet, cluster=scenario.cluster, costs=scenario.costs,
        uncertainty=scenario.uncertainty, catalog=values,
    )
    calibration = scenario_calibration(scenario=scenario)  # the fleet's profile (issue #16), unless opted out
    if calibration is not None:
        doc["calibration"] = calibration
    if scenario.fabric_study:  # a fabric study pinned to the scenario (issue #13): its routing shares
        doc["fabric_study"] = copy.deepcopy(scenario.fabric_study)
    return doc, version, values


def scenario_document(*, scenario: Scenario) -> dict[str, Any]:
    """The full engine document the scenario resolves to (what a run would snapshot)."""
    return scenario_resolve(scenario=scenario)[0]


def scenario_sections(*, scenario: Scenario) -> dict[str, Any]:
    """The scenario's stored sections (workload model / training / parallelism, its own cluster overrides,
    its fleet) and the pinned extras of its document (fabric study, the fleet's calibration profile): what an
    editor writes its inputs over, so settings it has no input for survive an edit."""
    workload = scenario.workload
    extras: dict[str, Any] = {}
    if scenario.fabric_study:
        extras["fabric_study"] = copy.deepcopy(scenario.fabric_study)
    calibration = scenario_calibration(scenario=scenario)
    if calibration is not None:
        extras["calibration"] = calibration
    return {
        "model": copy.deepcopy(workload.model or {}), "training": copy.deepcopy(workload.training or {}),
        "parallelism": copy.deepcopy(workload.parallelism), "cluster": copy.deepcopy(scenario.cluster or {}),
        "fleet_id": scenario.fleet_id, "extras": extras,
    }


def scenario_save(
    *,
    team: Team,
    user: Any,
    scenario: Scenario | None = None,
    name: str,
    description: str = "",
    workload_name: str,
    model: Mapping[str, Any],
    training: Mapping[str, Any],
    parallelism: Mapping[str, Any] | str,
    cluster: Mapping[str, Any] | None,
    costs: Mapping[str, Any] | None,
    uncertainty: Mapping[str, Any] | None = None,
    fleet: Fleet | None = None,
    watched: bool = False,
) -> Scenario:
    """Create (``scenario`` None) or update a scenario together with its workload, in one transaction.

    This is what the scenario builder saves: the workload (model, training, parallelism) and the scenario
    (a fleet and/or an ad-hoc cluster, costs with optional ranges, uncertainty options). The resolved
    document is validated with the engine's rules before anything is written; errors name the document
    field (``model.heads``, ``cluster.gpus``, ``costs.pue``...). When the scenario's workload is shared with
    other scenarios, an update writes a new workload instead of changing theirs.
    """
    if scenario is not None and scenario.team_id != team.pk:
        raise _err("scenario", f"scenario {scenario.pk} not found")
    if fleet is not None and fleet.team_id != team.pk:
        raise _err("fleet", f"fleet {fleet.pk} not found")
    workload_fields: dict[str, Any] = {
        "name": workload_name, "model": copy.deepcopy(dict(model)), "training": copy.deepcopy(dict(training)),
        "parallelism": copy.deepcopy(parallelism if isinstance(parallelism, str) else dict(parallelism)),
    }
    _validate_workload(workload_fields)
    scenario_fields: dict[str, Any] = {
        "name": name, "description": description, "fleet": fleet, "cluster": dict(cluster or {}),
        "costs": copy.deepcopy(dict(costs or {})), "uncertainty": copy.deepcopy(dict(uncertainty or {})),
        "watched": bool(watched),
    }
    if not str(name or "").strip():
        raise _err("name", "This field is required.")
    # Validate the whole document up front, so a bad input never leaves a half-written workload behind.
    draft = Workload(team=team, **workload_fields)
    _validate_scenario(team_id=team.pk, data={**scenario_fields, "workload": draft}, current=scenario)
    checked = _validate_scenario_document(data={**scenario_fields, "workload": draft}, current=scenario)
    with transaction.atomic():  # the writes below reuse that check (parse once per save)
        if scenario is None:
            workload = workload_create(team=team, user=user, **workload_fields)
            return _scenario_create(team=team, user=user, fields={**scenario_fields, "workload": workload},
                                    checked=checked)
        scenario = Scenario.objects.select_for_update().select_related("workload").get(pk=scenario.pk)
        shared = scenario.workload.scenarios.exclude(pk=scenario.pk).exists()
        if shared:
            workload = workload_create(team=team, user=user, **workload_fields)
        else:
            workload = workload_update(workload=scenario.workload, user=user, **workload_fields)
        return _scenario_update(scenario=scenario, user=user, fields={**scenario_fields, "workload": workload},
                                checked=checked)
