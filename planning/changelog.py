"""Change logging: before/after JSON snapshots of planning objects and the diff of changed keys.

Services call :func:`snapshot` before a change and :func:`record` after it, inside the same transaction,
so a rolled-back write leaves no log entry and every committed write has one.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from typing import Any

from django.db import connection, models
from django.utils import timezone
from psycopg import sql
from psycopg.types.json import Jsonb

from core.context import current_request_id
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


def record_created(*, objs: Sequence[models.Model], object_type: str, user: Any) -> int:
    """One CREATE change-log row per object (same content as :func:`record`), written in bulk (imports).

    On PostgreSQL the rows go through ``COPY`` (psycopg's C path: ~10x faster than a bulk INSERT of 10,000
    rows with three JSON documents each); elsewhere through ``bulk_create``. Returns the number of rows.
    """
    if not objs:
        return 0
    rid = current_request_id()
    fields = [(f.attname if f.is_relation else f.name, f.attname) for f in objs[0]._meta.concrete_fields
              if f.name not in SKIPPED_FIELDS]
    user_id = user.pk if getattr(user, "pk", None) else None
    common = {"user_id": user_id, "user_name": getattr(user, "username", "") or "",
              "request_id": rid if rid != "-" else "", "action": ObjectChange.Action.CREATE.value,
              "object_type": object_type}
    rows = []
    for obj in objs:
        post = {name: _jsonable(getattr(obj, attname)) for name, attname in fields}
        rows.append({**common, "team_id": getattr(obj, "team_id", None), "object_id": obj.pk,
                     "object_repr": str(obj)[:200], "prechange": None, "postchange": post,
                     "diff": {k: {"before": None, "after": v} for k, v in sorted(post.items()) if v is not None}})
    if connection.vendor == "postgresql":
        _copy_change_rows(rows)
    else:
        ObjectChange.objects.bulk_create([ObjectChange(**row) for row in rows], batch_size=1000)
    return len(rows)


def _copy_change_rows(rows: list[dict[str, Any]]) -> None:
    now = timezone.now()
    columns = ["team_id", "user_id", "user_name", "request_id", "time", "action", "object_type", "object_id",
               "object_repr", "prechange", "postchange", "diff"]
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(ObjectChange._meta.db_table), sql.SQL(", ").join(map(sql.Identifier, columns)))
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row([row["team_id"], row["user_id"], row["user_name"], row["request_id"], now, row["action"],
                            row["object_type"], row["object_id"], row["object_repr"], None,
                            Jsonb(row["postchange"]), Jsonb(row["diff"])])
