"""Planning selectors: reads scoped by the one visibility rule (``Model.objects.for_request``) to what
the request (or user) may see."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

from engine.catalog import default_catalog
from planning.models import (
    Catalog,
    CatalogItem,
    CatalogVersion,
    Fleet,
    ObjectChange,
    Scenario,
    Workload,
)


def catalog_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[Catalog]:
    qs = Catalog.objects.for_request(request_or_user).select_related("team", "forked_from")
    if filters and filters.get("team"):
        qs = qs.filter(team__slug=filters["team"])
    return qs


def catalog_version_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[CatalogVersion]:
    qs = CatalogVersion.objects.for_request(request_or_user)
    if filters and filters.get("catalog"):
        qs = qs.filter(catalog_id=filters["catalog"])
    return qs.select_related("catalog")


def catalog_item_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[CatalogItem]:
    qs = CatalogItem.objects.for_request(request_or_user).select_related("version__catalog")
    for key in ("version", "kind", "key"):
        if filters and filters.get(key):
            qs = qs.filter(**{f"{key}_id" if key == "version" else key: filters[key]})
    return qs


def fleet_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[Fleet]:
    qs = Fleet.objects.for_request(request_or_user)
    if filters and filters.get("site"):
        qs = qs.filter(site=filters["site"])
    return qs


def workload_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[Workload]:
    return Workload.objects.for_request(request_or_user)


def scenario_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[Scenario]:
    qs = Scenario.objects.for_request(request_or_user).select_related(
        "fleet", "workload", "catalog", "pinned_version"
    )
    if filters and "watched" in filters:
        qs = qs.filter(watched=bool(filters["watched"]))
    return qs


def change_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[ObjectChange]:
    """Change history of the teams' objects (and of the global catalog)."""
    qs = ObjectChange.objects.for_request(request_or_user)
    if filters:
        if filters.get("object_type"):
            qs = qs.filter(object_type=filters["object_type"])
        if filters.get("object_id"):
            qs = qs.filter(object_id=filters["object_id"])
    return qs.select_related("user")


def catalog_items_for_display(version: Any) -> list[dict[str, Any]]:
    """Items of a catalog version in engine form; the built-in default catalog before it is loaded."""
    if version is not None:
        return [i.as_engine_item() for i in version.items.all()]

    return list(default_catalog().values())
