"""Serializer fields that only see objects the request may read (other teams' ids → "not found")."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers


class ScopedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A PK field whose queryset is narrowed by the one visibility rule (``Model.objects.for_request``):
    the request's teams, plus rows everyone may read (the default catalog and its versions)."""

    default_error_messages = {"does_not_exist": "{pk_value} not found."}

    def get_queryset(self) -> QuerySet:
        qs = super().get_queryset()
        assert qs is not None
        return qs.for_request(self.context.get("request"))  # type: ignore[attr-defined]


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean only: ``"true"``, ``1`` or ``"yes"`` are refused rather than coerced (issue #11)."""

    default_error_messages = {"invalid": "must be true or false, got {input!r}."}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=str(data)[:40])
        raise AssertionError("unreachable")  # self.fail raises
