"""Vendor catalogs: immutable versions, items, forks, the global default loaded from the engine."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from django.apps import apps
from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from accounts.models import Membership, Team
from accounts.roles import Capability, role_allows
from core.errors import Conflict, PermissionDenied, ValidationError
from core.text import JSONTextError, find_bad_text, loads_json
from engine.catalog import default_catalog
from planning import changelog
from planning.models import CATALOG_KINDS, Catalog, CatalogItem, CatalogVersion, ObjectChange
from planning.services.common import DEFAULT_CATALOG_NAME, ITEM_FIELDS, _err


def catalog_runs(*, catalog: Catalog) -> QuerySet[Any]:
    """Up to 50 runs computed with any version of ``catalog``.

    Runs live in the simulations app, which sits above planning: reached through the app registry, not
    an import.
    """
    run_model = apps.get_model("simulations", "SimulationRun")
    return run_model.objects.filter(catalog_version__catalog=catalog)[:50]


def catalog_default() -> Catalog | None:
    """The global default catalog (team NULL), if loaded."""
    return Catalog.objects.filter(team__isnull=True).order_by("id").first()


@lru_cache(maxsize=64)
def _version_values(version_id: int, created_at: str) -> str:
    # Versions are immutable, so their engine mapping is cached per process (as JSON, copied on read).
    # The creation time is part of the key so a reused primary key (tests, restores) never hits.
    items = CatalogItem.objects.filter(version_id=version_id).order_by("key")
    return json.dumps({i.key: i.as_engine_item() for i in items})


def catalog_values(*, version: CatalogVersion | None) -> dict[str, dict[str, Any]]:
    """The engine catalog mapping ``{key: item}`` of a version; the engine's own default when None."""
    if version is None:
        return default_catalog()
    return json.loads(_version_values(version.pk, version.created_at.isoformat()))


def catalog_resolve(
    *, catalog: Catalog | None, pinned_version: CatalogVersion | None = None
) -> tuple[CatalogVersion | None, dict[str, dict[str, Any]]]:
    """Resolve (catalog, pin) to a concrete version and its values. NULL catalog = global default."""
    version = pinned_version
    if version is None:
        cat = catalog if catalog is not None else catalog_default()
        version = cat.latest_version() if cat is not None else None
    return version, catalog_values(version=version)


def _items_of(version: CatalogVersion | None) -> dict[str, dict[str, Any]]:
    if version is None:
        return {}
    return {i.key: i.as_engine_item() for i in version.items.all()}


def _item_diff(old: Mapping[str, dict[str, Any]], new: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    changed: dict[str, Any] = {}
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            changed[f"items.{key}"] = {"before": old.get(key), "after": new.get(key)}
    return changed


def _create_version(
    *,
    catalog: Catalog,
    items: Mapping[str, dict[str, Any]],
    user: Any,
    note: str = "",
    effective_date: dt.date | None = None,
) -> CatalogVersion:
    """Append the next immutable version holding ``items``. Caller holds a transaction."""
    Catalog.objects.select_for_update().filter(pk=catalog.pk).first()  # serialize concurrent edits
    number = (catalog.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = CatalogVersion.objects.create(
        catalog=catalog,
        number=number,
        effective_date=effective_date or timezone.localdate(),
        note=note[:500],
        created_by=user if getattr(user, "pk", None) else None,
    )
    CatalogItem.objects.bulk_create(
        [CatalogItem(version=version, **{f: item.get(f) for f in ITEM_FIELDS}) for item in items.values()]
    )
    return version


def _clean_item(data: Mapping[str, Any], *, prefix: str = "") -> dict[str, Any]:
    """Validate one catalog item; errors name ``prefix + field``."""
    errors: dict[str, list[str]] = {}
    item: dict[str, Any] = {}
    key = str(data.get("key") or "").strip()
    if not key:
        errors[prefix + "key"] = ["This field is required."]
    elif len(key) > 80:
        errors[prefix + "key"] = ["At most 80 characters."]
    item["key"] = key
    kind = str(data.get("kind") or "").strip()
    if kind not in CATALOG_KINDS:
        errors[prefix + "kind"] = [f"must be one of {', '.join(CATALOG_KINDS)}"]
    item["kind"] = kind
    item["name"] = str(data.get("name") or key).strip()[:200]
    for num in ("unit_price_usd", "power_w"):
        raw = data.get(num)
        if raw in (None, ""):
            item[num] = None
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            errors[prefix + num] = ["must be a number"]
            continue
        if value < 0 or value != value or value in (float("inf"), float("-inf")):
            errors[prefix + num] = ["must be a finite number >= 0"]
        item[num] = value
    specs = data.get("specs") or {}
    if isinstance(specs, str):
        try:
            specs = loads_json(specs) if specs.strip() else {}
        except (json.JSONDecodeError, JSONTextError):
            errors[prefix + "specs"] = ["must be a JSON object"]
            specs = {}
    if not isinstance(specs, dict):
        errors[prefix + "specs"] = ["must be a JSON object"]
        specs = {}
    bad = find_bad_text(specs)  # JSON text in a CSV cell may carry \u0000 or lone-surrogate escapes
    if bad is not None:
        errors[prefix + "specs"] = [f"{bad[1]}, at {bad[0]}"]
        specs = {}
    item["specs"] = specs
    item["source"] = str(data.get("source") or "")
    if errors:
        raise ValidationError(errors)
    return item


def catalog_load_default(*, user: Any = None, note: str = "Loaded from engine/catalog/data") -> CatalogVersion:
    """Load the engine's default catalog files as the global catalog; a new version only if they changed."""
    items = default_catalog()
    with transaction.atomic():
        catalog = catalog_default()
        if catalog is None:
            catalog = Catalog.objects.create(name=DEFAULT_CATALOG_NAME, team=None,
                                             description="Vendor list prices and specs shipped with the engine.")
            changelog.record(obj=catalog, object_type="catalog", action=ObjectChange.Action.CREATE, user=user)
        latest = catalog.latest_version()
        if latest is not None and _items_of(latest) == {k: {f: v.get(f) for f in ITEM_FIELDS} for k, v in items.items()}:
            return latest
        version = _create_version(catalog=catalog, items=items, user=user, note=note)
        changelog.record(
            obj=catalog, object_type="catalog", action=ObjectChange.Action.UPDATE, user=user,
            before={"version": latest.number if latest else None}, after={"version": version.number},
            extra_diff=_item_diff(_items_of(latest), items),
        )
    return version


def catalog_create(*, team: Team, user: Any, name: str, description: str = "") -> Catalog:
    """A new, empty team catalog (version 1 with no items)."""
    if not name.strip():
        raise _err("name", "This field is required.")
    with transaction.atomic():
        catalog = Catalog.objects.create(team=team, name=name.strip(), description=description,
                                         created_by=user, updated_by=user)
        _create_version(catalog=catalog, items={}, user=user, note="created")
        changelog.record(obj=catalog, object_type="catalog", action=ObjectChange.Action.CREATE, user=user)
    return catalog


def _check_fork_allowed(*, catalog: Catalog, team: Team, user: Any) -> None:
    if catalog.team_id is None or catalog.team_id == team.pk:
        return
    role = Membership.objects.filter(user_id=getattr(user, "pk", None) or 0, team_id=catalog.team_id).values_list(
        "role", flat=True).first()
    if role is None or not role_allows(role, Capability.CATALOG):
        raise PermissionDenied(
            "Forking a team catalog into another team publishes its prices there: it needs the catalog "
            f"capability (admin) in the source team {getattr(catalog.team, 'name', '')!r}, not only read access."
        )


def catalog_fork(
    *, catalog: Catalog, team: Team, user: Any, name: str | None = None, version: CatalogVersion | None = None
) -> Catalog:
    """Copy a catalog (by default its latest version) into a new catalog owned by ``team``.

    Forking policy (docs/security.md): a team catalog holds that team's negotiated prices, and a fork makes them
    readable by every member of the target team. Forking within a team, or forking the global catalog, needs
    read access to the source (the caller checks the target team's catalog capability). Forking a team catalog
    into *another* team publishes it there, so it also needs the catalog capability (admin) in the source team:
    a viewer of team A who is admin of team B cannot copy A's prices into B.
    """
    _check_fork_allowed(catalog=catalog, team=team, user=user)
    if version is not None and version.catalog_id != catalog.pk:
        raise _err("version", "is not a version of this catalog")
    source = version or catalog.latest_version()
    with transaction.atomic():
        fork = Catalog.objects.create(
            team=team,
            name=(name or f"{catalog.name} ({team.name})").strip()[:120],
            description=f"Fork of {catalog.name}" + (f" v{source.number}" if source else ""),
            forked_from=catalog,
            forked_from_version=source,
            created_by=user,
            updated_by=user,
        )
        _create_version(catalog=fork, items=_items_of(source), user=user,
                        note=f"forked from {catalog.name}" + (f" v{source.number}" if source else ""))
        changelog.record(obj=fork, object_type="catalog", action=ObjectChange.Action.CREATE, user=user)
    return fork


def catalog_update(*, catalog: Catalog, user: Any, name: str | None = None, description: str | None = None) -> Catalog:
    _require_team_catalog(catalog)
    with transaction.atomic():
        before = changelog.snapshot(catalog)
        if name is not None:
            if not name.strip():
                raise _err("name", "This field may not be blank.")
            catalog.name = name.strip()
        if description is not None:
            catalog.description = description
        catalog.updated_by = user
        catalog.save()
        changelog.record(obj=catalog, object_type="catalog", action=ObjectChange.Action.UPDATE, user=user,
                         before=before)
    return catalog


def _require_team_catalog(catalog: Catalog) -> None:
    if catalog.team_id is None:
        raise PermissionDenied("The global default catalog is read-only; fork it to edit.")


def catalog_edit(
    *,
    catalog: Catalog,
    user: Any,
    change: Callable[[dict[str, dict[str, Any]]], None],
    note: str = "",
    effective_date: dt.date | None = None,
) -> CatalogVersion:
    """Apply ``change`` to a copy of the latest items and store the result as the next version."""
    _require_team_catalog(catalog)
    with transaction.atomic():
        latest = catalog.latest_version()
        old = _items_of(latest)
        new = copy.deepcopy(old)
        change(new)
        version = _create_version(catalog=catalog, items=new, user=user, note=note, effective_date=effective_date)
        Catalog.objects.filter(pk=catalog.pk).update(updated_by=user, updated_at=timezone.now())
        changelog.record(
            obj=catalog, object_type="catalog", action=ObjectChange.Action.UPDATE, user=user,
            before={"version": latest.number if latest else None}, after={"version": version.number},
            extra_diff=_item_diff(old, new),
        )
    return version


def catalog_item_create(*, catalog: Catalog, user: Any, data: Mapping[str, Any], note: str = "") -> CatalogItem:
    item = _clean_item(data)

    def change(items: dict[str, dict[str, Any]]) -> None:
        if item["key"] in items:
            raise _err("key", f"{item['key']!r} already exists in this catalog")
        items[item["key"]] = item

    version = catalog_edit(catalog=catalog, user=user, change=change, note=note or f"added {item['key']}")
    return version.items.get(key=item["key"])


def catalog_item_update(*, item: CatalogItem, user: Any, data: Mapping[str, Any], note: str = "") -> CatalogItem:
    """Change one item: creates the next catalog version with the change; returns the new item row."""
    catalog = item.version.catalog
    key = item.key

    def change(items: dict[str, dict[str, Any]]) -> None:
        if key not in items:
            raise _err("key", f"{key!r} is no longer in the latest version of this catalog")
        merged = {**items[key], **{k: v for k, v in data.items() if k in ITEM_FIELDS}}
        cleaned = _clean_item(merged)
        if cleaned["key"] != key:
            if cleaned["key"] in items:
                raise _err("key", f"{cleaned['key']!r} already exists in this catalog")
            del items[key]
        items[cleaned["key"]] = cleaned

    version = catalog_edit(catalog=catalog, user=user, change=change, note=note or f"changed {key}")
    new_key = str(data.get("key") or key).strip()
    return version.items.get(key=new_key)


def catalog_item_delete(*, item: CatalogItem, user: Any, note: str = "") -> CatalogVersion:
    key = item.key

    def change(items: dict[str, dict[str, Any]]) -> None:
        if key not in items:
            raise _err("key", f"{key!r} is no longer in the latest version of this catalog")
        del items[key]

    return catalog_edit(catalog=item.version.catalog, user=user, change=change, note=note or f"removed {key}")


def catalog_version_dependents(*, version: CatalogVersion) -> list[str]:
    deps = [f"scenario {s.pk}: {s.name}" for s in version.pinned_scenarios.all().order_by("pk")]
    deps += [f"run {r.pk}" for r in version.runs.order_by("pk")[:50]]
    if version.catalog.latest_version() == version:
        deps += [f"scenario {s.pk}: {s.name} (follows latest)"
                 for s in version.catalog.scenarios.filter(pinned_version__isnull=True).order_by("pk")]
    return deps


def catalog_version_delete(*, version: CatalogVersion, user: Any) -> None:
    """Delete a version nobody uses; refused with 409 listing the dependents otherwise."""
    _require_team_catalog(version.catalog)
    with transaction.atomic():
        deps = catalog_version_dependents(version=version)
        if deps:
            raise Conflict({"detail": [f"catalog version v{version.number} is in use"], "dependents": deps})
        if version.catalog.versions.count() <= 1:
            raise Conflict({"detail": ["cannot delete the only version of a catalog"], "dependents": []})
        changelog.record(obj=version.catalog, object_type="catalog", action=ObjectChange.Action.UPDATE, user=user,
                         before={"deleted_version": None}, after={"deleted_version": version.number})
        version.delete()


def catalog_delete(*, catalog: Catalog, user: Any) -> None:
    _require_team_catalog(catalog)
    with transaction.atomic():
        deps = [f"scenario {s.pk}: {s.name}" for s in catalog.scenarios.all().order_by("pk")]
        deps += [f"run {r.pk}" for r in catalog_runs(catalog=catalog)]
        if deps:
            raise Conflict({"detail": [f"catalog {catalog.name!r} is in use"], "dependents": deps})
        changelog.record(obj=catalog, object_type="catalog", action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(catalog))
        catalog.delete()
