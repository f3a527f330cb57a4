"""Change logging: before/after JSON snapshots of planning objects and the diff of changed keys.

Services call :func:`snapshot` before a change and :func:`record` after it, inside the same transaction,
so a rolled-back write leaves no log entry and every committed write has one.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from django.db import models

from planner.middleware import current_request_id
from planning.models import ObjectChange

SKIPPED_FIELDS = frozenset({"created_at", "updated_at", "updated_by", "created_by"})


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def snapshot(obj: models.Model) -> dict[str, Any]:
    """The object's concrete fields as JSON (foreign keys as ids)."""
    data: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.name in SKIPPED_FIELDS:
            continue
        data[field.attname if field.is_relation else field.name] = _jsonable(field.value_from_object(obj))
    return data


def diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Only the keys whose value changed: ``{key: {"before": old, "after": new}}``."""
    before = before or {}
    after = after or {}
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            out[key] = {"before": before.get(key), "after": after.get(key)}
    return out


def record(
    *,
    obj: models.Model,
    object_type: str,
    action: str,
    user: Any,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    team_id: int | None = None,
    extra_diff: dict[str, Any] | None = None,
) -> ObjectChange | None:
    """Write one change-log row; an update that changed nothing is not logged."""
    post = None if action == ObjectChange.Action.DELETE else after if after is not None else snapshot(obj)
    changes = diff(before, post)
    if extra_diff:
        changes.update(extra_diff)
    if action == ObjectChange.Action.UPDATE and not changes:
        return None
    return ObjectChange.objects.create(
        team_id=team_id if team_id is not None else getattr(obj, "team_id", None),
        user=user if getattr(user, "pk", None) else None,
        user_name=getattr(user, "username", "") or "",
        request_id=current_request_id() if current_request_id() != "-" else "",
        action=action,
        object_type=object_type,
        object_id=obj.pk,
        object_repr=str(obj)[:200],
        prechange=before,
        postchange=post,
        diff=changes,
    )
