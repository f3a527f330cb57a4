"""Fleets: the clusters a team owns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from rest_framework import exceptions

from accounts.models import Team
from planning import changelog
from planning.models import Fleet, ObjectChange
from planning.services.catalogs import catalog_resolve, catalog_values
from planning.services.common import FLEET_FIELDS, _delete_unless_used, _err, _update_logged


def _validate_fleet(data: Mapping[str, Any], *, prefix: str = "") -> None:
    errors: dict[str, list[str]] = {}
    if "name" in data and not str(data["name"] or "").strip():
        errors[prefix + "name"] = ["This field is required."]
    for f in ("server_count", "gpus_per_node", "nics_per_node", "nic_gbps"):
        if f in data and data[f] is not None:
            try:
                if int(data[f]) < 1:
                    errors[prefix + f] = ["must be at least 1"]
            except (TypeError, ValueError):
                errors[prefix + f] = ["must be an integer"]
    if "oversubscription" in data and data["oversubscription"] is not None:
        try:
            if float(data["oversubscription"]) < 1:
                errors[prefix + "oversubscription"] = ["must be >= 1 (1 = non-blocking)"]
        except (TypeError, ValueError):
            errors[prefix + "oversubscription"] = ["must be a number"]
    if data.get("server_model"):
        cat = catalog_values(version=catalog_resolve(catalog=None)[0])
        item = cat.get(str(data["server_model"]))
        if item is None or item.get("kind") != "server":
            known = ", ".join(sorted(k for k, v in cat.items() if v.get("kind") == "server"))
            errors[prefix + "server_model"] = [f"unknown server {data['server_model']!r}; known: {known}"]
    if errors:
        raise exceptions.ValidationError(errors)


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
