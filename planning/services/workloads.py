"""Workloads: the model, training and parallelism a scenario runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from accounts.models import Team
from core.errors import ValidationError, engine_error
from engine.document.workload import validate_workload
from engine.errors import ScenarioError
from planning import changelog
from planning.models import ObjectChange, Workload
from planning.services.common import WORKLOAD_FIELDS, _delete_unless_used, _err, _update_logged


def _validate_workload(data: Mapping[str, Any]) -> None:
    errors: dict[str, list[str]] = {}
    if "name" in data and not str(data["name"] or "").strip():
        errors["name"] = ["This field is required."]
    for f in ("model", "training"):
        if f in data and not isinstance(data[f], dict):
            errors[f] = ["must be a JSON object"]
    if "parallelism" in data and not (data["parallelism"] == "auto" or isinstance(data["parallelism"], dict)):
        errors["parallelism"] = ['must be "auto" or a JSON object']
    if errors:
        raise ValidationError(errors)


def _validate_sections(model: Any, training: Any, parallelism: Any) -> None:
    """The engine parser's own checks of the three sections (types, bounds, keys): ``model: {}`` is refused."""
    try:
        validate_workload(model, training, parallelism)
    except ScenarioError as exc:
        raise engine_error(exc) from None


def workload_create(*, team: Team, user: Any, **fields: Any) -> Workload:
    data = {k: v for k, v in fields.items() if k in WORKLOAD_FIELDS}
    if not data.get("name"):
        raise _err("name", "This field is required.")
    data.setdefault("model", {})
    data.setdefault("training", {})
    data.setdefault("parallelism", "auto")
    _validate_workload(data)
    _validate_sections(data["model"], data["training"], data["parallelism"])
    with transaction.atomic():
        workload = Workload.objects.create(team=team, created_by=user, updated_by=user, **data)
        changelog.record(obj=workload, object_type="workload", action=ObjectChange.Action.CREATE, user=user)
    return workload


def workload_update(*, workload: Workload, user: Any, **fields: Any) -> Workload:
    data = {k: v for k, v in fields.items() if k in WORKLOAD_FIELDS}
    _validate_workload(data)
    if {"model", "training", "parallelism"} & set(data):
        _validate_sections(data.get("model", workload.model), data.get("training", workload.training),
                           data.get("parallelism", workload.parallelism))
    _update_logged(workload, object_type="workload", user=user, data=data)
    return workload


def workload_delete(*, workload: Workload, user: Any) -> None:
    _delete_unless_used(workload, object_type="workload", user=user)
