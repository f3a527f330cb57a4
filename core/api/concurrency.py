"""Optimistic concurrency for edits: ``ETag`` on reads, ``If-Match`` on writes.

Two planners editing the same scenario would otherwise silently overwrite each other. A detail GET returns
an ``ETag`` (a digest of the row's id and ``updated_at``); a PUT/PATCH/DELETE that sends ``If-Match`` with a
stale tag gets **412 Precondition Failed** and changes nothing. Clients that send no ``If-Match`` keep
last-write-wins behaviour.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rest_framework import exceptions, status


class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The object changed since you read it (If-Match does not match its ETag); re-read and retry."
    default_code = "precondition_failed"


def etag_for(instance: Any) -> str:
    stamp = getattr(instance, "updated_at", None)
    raw = f"{type(instance).__name__}:{instance.pk}:{stamp.isoformat() if stamp else ''}"
    return '"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'


def check_if_match(request: Any, instance: Any) -> None:
    """Raise PreconditionFailed when the request's If-Match names none of the instance's current tags."""
    header = request.headers.get("If-Match")
    if not header or header.strip() == "*":
        return
    wanted = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    if etag_for(instance) not in wanted:
        raise PreconditionFailed()
