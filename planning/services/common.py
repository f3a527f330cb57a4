"""What every planning service shares: field lists, field errors, change-logged updates, delete-unless-used."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from core.errors import Conflict, ValidationError, field_error
from planning import changelog
from planning.models import Fleet, ObjectChange, Workload

DEFAULT_CATALOG_NAME = "Default catalog"
ITEM_FIELDS = ("key", "kind", "name", "unit_price_usd", "power_w", "specs", "source")
FLEET_FIELDS = (
    "name", "site", "server_model", "server_count", "gpus_per_node", "nics_per_node", "nic_gbps", "fabric",
    "topology", "oversubscription", "in_service_date", "notes",
)
WORKLOAD_FIELDS = ("name", "description", "model", "training", "parallelism")
SCENARIO_FIELDS = (
    "name", "description", "fleet", "cluster", "workload", "costs", "uncertainty", "catalog", "pinned_version",
    "watched", "use_calibration", "calibration_fleet", "fabric_study",
)
DOCUMENT_SECTIONS = ("model", "training", "parallelism", "cluster", "costs", "uncertainty")


def _err(field: str, message: str) -> ValidationError:
    return field_error(field, message)


def _update_logged(obj: Any, *, object_type: str, user: Any, data: Mapping[str, Any],
                   full_clean_exclude: list[str] | None = None) -> None:
    """Set ``data`` on ``obj``, stamp ``updated_by`` and record the change (before/after) atomically."""
    with transaction.atomic():
        before = changelog.snapshot(obj)
        for k, v in data.items():
            setattr(obj, k, v)
        obj.updated_by = user
        if full_clean_exclude is not None:
            obj.full_clean(exclude=full_clean_exclude)
        obj.save()
        changelog.record(obj=obj, object_type=object_type, action=ObjectChange.Action.UPDATE, user=user,
                         before=before)


def _delete_unless_used(obj: Fleet | Workload, *, object_type: str, user: Any) -> None:
    """Delete a fleet or workload, refused (409 with the dependents) while a scenario uses it."""
    with transaction.atomic():
        deps = [f"scenario {s.pk}: {s.name}" for s in obj.scenarios.all().order_by("pk")]
        if deps:
            raise Conflict({"detail": [f"{object_type} {obj.name!r} is in use"], "dependents": deps})
        changelog.record(obj=obj, object_type=object_type, action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(obj))
        obj.delete()
