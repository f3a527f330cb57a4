"""Serializer fields that only see objects the request may read (other teams' ids → "not found")."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from rest_framework import serializers

from accounts.scoping import visible_team_ids


class ScopedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A PK field whose queryset is narrowed to the request's visible teams.

    ``team_path`` is the lookup to the owning team; ``allow_global`` also admits team-NULL rows
    (the default catalog and its versions).
    """

    default_error_messages = {"does_not_exist": "{pk_value} not found."}

    def __init__(self, *, team_path: str = "team", allow_global: bool = False, **kwargs: Any) -> None:
        self.team_path = team_path
        self.allow_global = allow_global
        super().__init__(**kwargs)

    def get_queryset(self) -> QuerySet:
        qs = super().get_queryset()
        assert qs is not None
        request = self.context.get("request")
        teams = visible_team_ids(request) if request is not None else []
        cond = Q(**{f"{self.team_path}_id__in": teams})
        if self.allow_global:
            cond |= Q(**{f"{self.team_path}__isnull": True})
        return qs.filter(cond)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean only: ``"true"``, ``1`` or ``"yes"`` are refused rather than coerced (issue #11)."""

    default_error_messages = {"invalid": "must be true or false, got {input!r}."}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=str(data)[:40])
        raise AssertionError("unreachable")  # self.fail raises
