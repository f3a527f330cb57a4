"""Fleets: the clusters a team owns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from accounts.models import Team
from core.errors import ValidationError
from engine.errors import ScenarioError
from engine.schema.bounds import check_field
from engine.schema.types import FABRICS, TOPOLOGIES
from planning import changelog
from planning.models import Fleet, ObjectChange
from planning.services.catalogs import catalog_resolve, catalog_values
from planning.services.common import FLEET_FIELDS, _delete_unless_used, _err, _update_logged

# Fleet numbers share the scenario's bounds (engine/schema/bounds.py): a fleet becomes a cluster section.
FLEET_BOUNDS = {"server_count": "fleet.server_count", "gpus_per_node": "cluster.gpus_per_node",
                "nics_per_node": "cluster.nics_per_node", "nic_gbps": "cluster.nic_gbps",
                "oversubscription": "cluster.oversubscription"}


def _validate_fleet(data: Mapping[str, Any], *, prefix: str = "",
                    catalog: Mapping[str, Any] | None = None) -> None:
    """Check fleet fields; ``catalog`` (resolved values) saves the lookup when many fleets are checked."""
    errors: dict[str, list[str]] = {}
    codes: dict[str, str] = {}
    if "name" in data and not str(data["name"] or "").strip():
        errors[prefix + "name"] = ["This field is required."]
    for f, bound in FLEET_BOUNDS.items():
        if f in data and data[f] is not None:
            try:
                check_field(data[f], bound)
            except ScenarioError as exc:
                errors[prefix + f] = [exc.message]
                codes[prefix + f] = exc.code
    for f, allowed in (("fabric", FABRICS), ("topology", TOPOLOGIES)):  # the engine's enums, not a copy
        if f in data and data[f] not in allowed:
            errors[prefix + f] = [f"must be one of {', '.join(allowed)}"]
    if data.get("server_model"):
        cat = catalog if catalog is not None else catalog_values(version=catalog_resolve(catalog=None)[0])
        item = cat.get(str(data["server_model"]))
        if item is None or item.get("kind") != "server":
            known = ", ".join(sorted(k for k, v in cat.items() if v.get("kind") == "server"))
            errors[prefix + "server_model"] = [f"unknown server {data['server_model']!r}; known: {known}"]
    if errors:
        raise ValidationError(errors, codes=codes)


def fleet_create(*, team: Team, user: Any, **fields: Any) -> Fleet:
    data = {k: v for k, v in fields.items() if k in FLEET_FIELDS}
    for required in ("name", "server_model", "server_count"):
        if data.get(required) in (None, ""):
            raise _err(required, "This field is required.")
    _validate_fleet(data)
    with transaction.atomic():
        fleet = Fleet(team=team, created_by=user, updated_by=user, **data)
        fleet.full_clean(exclude=["team", "created_by", "updated_by"])
        fleet.save()
        changelog.record(obj=fleet, object_type="fleet", action=ObjectChange.Action.CREATE, user=user)
    return fleet


def fleet_update(*, fleet: Fleet, user: Any, **fields: Any) -> Fleet:
    data = {k: v for k, v in fields.items() if k in FLEET_FIELDS}
    _validate_fleet(data)
    _update_logged(fleet, object_type="fleet", user=user, data=data,
                   full_clean_exclude=["team", "created_by", "updated_by"])
    return fleet


def fleet_delete(*, fleet: Fleet, user: Any) -> None:
    _delete_unless_used(fleet, object_type="fleet", user=user)
