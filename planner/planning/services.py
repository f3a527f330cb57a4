"""Planning services: every write to catalogs, fleets, workloads and scenarios goes through here.

Keyword-only, typed, transactional; invalid input raises DRF ``ValidationError`` naming the field, so
the API and the portal forms show the same field errors. Each write is change-logged in its transaction.
"""

from __future__ import annotations

import copy
import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from rest_framework import exceptions, status

from accounts.models import Team
from planner.planning import changelog
from planner.planning.models import (
    CATALOG_KINDS,
    Catalog,
    CatalogItem,
    CatalogVersion,
    Fleet,
    ObjectChange,
    Scenario,
    Workload,
)

DEFAULT_CATALOG_NAME = "Default catalog"
ITEM_FIELDS = ("key", "kind", "name", "unit_price_usd", "power_w", "specs", "source")
FLEET_FIELDS = (
    "name", "site", "server_model", "server_count", "gpus_per_node", "nics_per_node", "nic_gbps", "fabric",
    "topology", "oversubscription", "in_service_date", "notes",
)
WORKLOAD_FIELDS = ("name", "description", "model", "training", "parallelism")
SCENARIO_FIELDS = (
    "name", "description", "fleet", "cluster", "workload", "costs", "uncertainty", "catalog", "pinned_version",
    "watched",
)
DOCUMENT_SECTIONS = ("model", "training", "parallelism", "cluster", "costs", "uncertainty")


class Conflict(exceptions.ValidationError):
    """409: the object is in use. The body lists the dependents (``{"dependents": [...]}``)."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def _err(field: str, message: str) -> exceptions.ValidationError:
    return exceptions.ValidationError({field: [message]})

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



# --- Catalogs ------------------------------------------------------------------------------------------
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
        from simulations.engine.catalog import default_catalog

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
            specs = json.loads(specs) if specs.strip() else {}
        except json.JSONDecodeError:
            errors[prefix + "specs"] = ["must be a JSON object"]
            specs = {}
    if not isinstance(specs, dict):
        errors[prefix + "specs"] = ["must be a JSON object"]
        specs = {}
    item["specs"] = specs
    item["source"] = str(data.get("source") or "")
    if errors:
        raise exceptions.ValidationError(errors)
    return item


def catalog_load_default(*, user: Any = None, note: str = "Loaded from simulations/engine/data") -> CatalogVersion:
    """Load the engine's default catalog files as the global catalog; a new version only if they changed."""
    from simulations.engine.catalog import default_catalog

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


def catalog_fork(
    *, catalog: Catalog, team: Team, user: Any, name: str | None = None, version: CatalogVersion | None = None
) -> Catalog:
    """Copy a catalog (by default its latest version) into a new catalog owned by ``team``."""
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
        raise exceptions.PermissionDenied("The global default catalog is read-only; fork it to edit.")


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


MAX_CSV_ROWS = 10_000
MAX_CSV_FIELD_CHARS = 20_000


def _read_csv(file: Any) -> list[dict[str, str]]:
    """Parse an uploaded CSV defensively: size, encoding, NUL bytes, field and row limits → 400/413."""
    from django.conf import settings

    from planner.planning.api.errors import PayloadTooLarge

    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2 * 1024 * 1024
    size = getattr(file, "size", None)
    if size is not None and size > limit:
        raise PayloadTooLarge(f"file: {size} bytes is over the {limit}-byte upload limit")
    raw = file.read(limit + 1) if hasattr(file, "read") else file
    if len(raw) > limit:
        raise PayloadTooLarge(f"file: over the {limit}-byte upload limit")
    if isinstance(raw, bytes):
        if b"\x00" in raw:
            raise _err("file", "contains NUL bytes; upload a UTF-8 text CSV")
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise _err("file", "must be UTF-8 encoded CSV") from None
    elif "\x00" in raw:
        raise _err("file", "contains NUL bytes; upload a UTF-8 text CSV")
    reader = csv.DictReader(io.StringIO(raw))
    rows: list[dict[str, str]] = []
    try:
        if not reader.fieldnames:
            raise _err("file", "is empty or has no header row")
        for row in reader:
            if len(rows) >= MAX_CSV_ROWS:
                raise _err("file", f"has more than {MAX_CSV_ROWS} rows; split it")
            if any(v is not None and not isinstance(v, str) for v in row.values()) or None in row:
                raise _err(f"rows.{reader.line_num}", "has more cells than the header")
            if any(len(v or "") > MAX_CSV_FIELD_CHARS for v in row.values()):
                raise _err(f"rows.{reader.line_num}", f"a cell is longer than {MAX_CSV_FIELD_CHARS} characters")
            rows.append({(k or "").strip(): (v or "").strip() for k, v in row.items() if k is not None})
    except csv.Error as exc:
        raise _err("file", f"is not valid CSV (line {reader.line_num}): {exc}") from None
    return rows


def _row_errors(rows: Iterable[dict[str, str]], clean: Callable[[dict[str, str]], Any]) -> tuple[list[Any], dict[str, Any]]:
    """Clean every row; collect errors as ``{"rows": {"<line>": {field: [msg]}}}`` (line 2 = first data row)."""
    cleaned: list[Any] = []
    errors: dict[str, Any] = {}
    for index, row in enumerate(rows):
        line = str(index + 2)
        try:
            cleaned.append(clean(row))
        except exceptions.ValidationError as exc:
            errors[line] = exc.detail
    return cleaned, errors


def catalog_items_import(*, catalog: Catalog, user: Any, file: Any, note: str = "") -> CatalogVersion:
    """Upsert items from CSV (key,kind,name,unit_price_usd,power_w,specs,source) as one new version.

    All or nothing: any bad row rejects the whole file with every row's errors.
    """
    _require_team_catalog(catalog)
    rows = _read_csv(file)
    if not rows:
        raise _err("file", "has no data rows")
    seen: dict[str, str] = {}

    def clean(row: dict[str, str]) -> dict[str, Any]:
        line = str(len(seen_lines) + 2)
        seen_lines.append(line)
        key = (row.get("key") or "").strip()
        if key and key in seen:
            raise _err("key", f"duplicate of line {seen[key]}")
        if key:
            seen[key] = line
        return _clean_item(row)

    seen_lines: list[str] = []
    items, errors = _row_errors(rows, clean)
    if errors:
        raise exceptions.ValidationError({"rows": errors})

    def change(current: dict[str, dict[str, Any]]) -> None:
        for item in items:
            current[item["key"]] = item

    return catalog_edit(catalog=catalog, user=user, change=change, note=note or f"imported {len(items)} items")


def catalog_version_dependents(*, version: CatalogVersion) -> list[str]:
    from simulations.models import SimulationRun

    deps = [f"scenario {s.pk}: {s.name}" for s in version.pinned_scenarios.all().order_by("pk")]
    deps += [f"run {r.pk}" for r in SimulationRun.objects.filter(catalog_version=version).order_by("pk")[:50]]
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
    from simulations.models import SimulationRun

    _require_team_catalog(catalog)
    with transaction.atomic():
        deps = [f"scenario {s.pk}: {s.name}" for s in catalog.scenarios.all().order_by("pk")]
        deps += [f"run {r.pk}" for r in SimulationRun.objects.filter(catalog_version__catalog=catalog)[:50]]
        if deps:
            raise Conflict({"detail": [f"catalog {catalog.name!r} is in use"], "dependents": deps})
        changelog.record(obj=catalog, object_type="catalog", action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(catalog))
        catalog.delete()


# --- Fleets ----------------------------------------------------------------------------------------------
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


def _delete_unless_used(obj: Fleet | Workload, *, object_type: str, user: Any) -> None:
    """Delete a fleet or workload, refused (409 with the dependents) while a scenario uses it."""
    with transaction.atomic():
        deps = [f"scenario {s.pk}: {s.name}" for s in obj.scenarios.all().order_by("pk")]
        if deps:
            raise Conflict({"detail": [f"{object_type} {obj.name!r} is in use"], "dependents": deps})
        changelog.record(obj=obj, object_type=object_type, action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(obj))
        obj.delete()


def fleet_delete(*, fleet: Fleet, user: Any) -> None:
    _delete_unless_used(fleet, object_type="fleet", user=user)


def _clean_fleet_row(row: dict[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {k: v for k, v in row.items() if k in FLEET_FIELDS and v != ""}
    errors: dict[str, list[str]] = {}
    for required in ("name", "server_model", "server_count"):
        if not data.get(required):
            errors[required] = ["This field is required."]
    for f in ("server_count", "gpus_per_node", "nics_per_node", "nic_gbps"):
        if f in data:
            try:
                data[f] = int(data[f])
            except ValueError:
                errors[f] = ["must be an integer"]
    if "oversubscription" in data:
        try:
            data["oversubscription"] = float(data["oversubscription"])
        except ValueError:
            errors["oversubscription"] = ["must be a number"]
    if "in_service_date" in data:
        try:
            data["in_service_date"] = dt.date.fromisoformat(data["in_service_date"])
        except ValueError:
            errors["in_service_date"] = ["must be a date YYYY-MM-DD"]
    if errors:
        raise exceptions.ValidationError(errors)
    _validate_fleet({k: v for k, v in data.items() if k not in errors})
    return data


def fleets_import(*, team: Team, user: Any, file: Any) -> list[Fleet]:
    """Create fleets from CSV (columns = fleet fields). All or nothing, with per-row errors."""
    rows = _read_csv(file)
    if not rows:
        raise _err("file", "has no data rows")
    cleaned, errors = _row_errors(rows, _clean_fleet_row)
    if errors:
        raise exceptions.ValidationError({"rows": errors})
    with transaction.atomic():
        return [fleet_create(team=team, user=user, **data) for data in cleaned]


# --- Workloads -----------------------------------------------------------------------------------------
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
        raise exceptions.ValidationError(errors)


def workload_create(*, team: Team, user: Any, **fields: Any) -> Workload:
    data = {k: v for k, v in fields.items() if k in WORKLOAD_FIELDS}
    if not data.get("name"):
        raise _err("name", "This field is required.")
    data.setdefault("model", {})
    data.setdefault("training", {})
    data.setdefault("parallelism", "auto")
    _validate_workload(data)
    with transaction.atomic():
        workload = Workload.objects.create(team=team, created_by=user, updated_by=user, **data)
        changelog.record(obj=workload, object_type="workload", action=ObjectChange.Action.CREATE, user=user)
    return workload


def workload_update(*, workload: Workload, user: Any, **fields: Any) -> Workload:
    data = {k: v for k, v in fields.items() if k in WORKLOAD_FIELDS}
    _validate_workload(data)
    _update_logged(workload, object_type="workload", user=user, data=data)
    return workload


def workload_delete(*, workload: Workload, user: Any) -> None:
    _delete_unless_used(workload, object_type="workload", user=user)


# --- Scenarios -----------------------------------------------------------------------------------------
def _validate_scenario(*, team_id: int, data: Mapping[str, Any], current: Scenario | None = None) -> None:
    """Cross-object checks: related objects in the same team (others answer 'not found'), pin in catalog."""
    errors: dict[str, list[str]] = {}
    if "name" in data and not str(data["name"] or "").strip():
        errors["name"] = ["This field is required."]
    for f in ("fleet", "workload"):
        obj = data.get(f)
        if obj is not None and obj.team_id != team_id:
            errors[f] = [f"{f} {obj.pk} not found"]
    catalog = data.get("catalog", current.catalog if current else None)
    if catalog is not None and catalog.team_id not in (None, team_id):
        errors["catalog"] = [f"catalog {catalog.pk} not found"]
    pin = data.get("pinned_version", current.pinned_version if current else None)
    if pin is not None:
        expected = catalog.pk if catalog is not None else getattr(catalog_default(), "pk", None)
        if pin.catalog_id != expected:
            errors["pinned_version"] = ["must be a version of the scenario's catalog"]
    for f in ("cluster", "costs", "uncertainty"):
        if f in data and data[f] is not None and not isinstance(data[f], dict):
            errors[f] = ["must be a JSON object"]
    fleet = data.get("fleet", current.fleet if current else None)
    cluster = data.get("cluster", current.cluster if current else {})
    if fleet is None and not cluster:
        errors["cluster"] = ["give a fleet or an ad-hoc cluster"]
    if errors:
        raise exceptions.ValidationError(errors)


def document_validate(*, document: Mapping[str, Any], catalog: Mapping[str, dict[str, Any]] | None) -> None:
    """Check a full engine document with the engine's own rules; 400-style errors name the field."""
    from simulations.engine.validate import validate_scenario

    try:
        validate_scenario(document, catalog=catalog)
    except ValueError as exc:
        field = str(getattr(exc, "field", "") or "detail")
        raise exceptions.ValidationError({field: [str(getattr(exc, "message", exc))]}) from None


def _validate_scenario_document(*, data: Mapping[str, Any], current: Scenario | None = None) -> None:
    """The scenario's resolved document (workload + fleet/cluster + costs + catalog) must be valid."""
    workload = data.get("workload", current.workload if current else None)
    if workload is None:
        return
    catalog = data.get("catalog", current.catalog if current else None)
    pin = data.get("pinned_version", current.pinned_version if current else None)
    _, values = catalog_resolve(catalog=catalog, pinned_version=pin)
    doc = build_document(
        workload=workload,
        fleet=data.get("fleet", current.fleet if current else None),
        cluster=data.get("cluster", current.cluster if current else None),
        costs=data.get("costs", current.costs if current else None),
        uncertainty=data.get("uncertainty", current.uncertainty if current else None),
        catalog=values,
    )
    document_validate(document=doc, catalog=values or None)


def scenario_create(*, team: Team, user: Any, **fields: Any) -> Scenario:
    data = {k: v for k, v in fields.items() if k in SCENARIO_FIELDS}
    if not data.get("name"):
        raise _err("name", "This field is required.")
    if data.get("workload") is None:
        raise _err("workload", "This field is required.")
    for f in ("cluster", "costs", "uncertainty"):
        if data.get(f) is None:
            data[f] = {}
    _validate_scenario(team_id=team.pk, data=data)
    _validate_scenario_document(data=data)
    with transaction.atomic():
        scenario = Scenario.objects.create(team=team, created_by=user, updated_by=user, **data)
        changelog.record(obj=scenario, object_type="scenario", action=ObjectChange.Action.CREATE, user=user)
    return scenario


def scenario_update(*, scenario: Scenario, user: Any, **fields: Any) -> Scenario:
    data = {k: v for k, v in fields.items() if k in SCENARIO_FIELDS}
    for f in ("cluster", "costs", "uncertainty"):
        if f in data and data[f] is None:
            data[f] = {}
    _validate_scenario(team_id=scenario.team_id, data=data, current=scenario)
    _validate_scenario_document(data=data, current=scenario)
    _update_logged(scenario, object_type="scenario", user=user, data=data)
    return scenario


def scenario_delete(*, scenario: Scenario, user: Any) -> None:
    with transaction.atomic():
        changelog.record(obj=scenario, object_type="scenario", action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(scenario))
        scenario.delete()


def fleet_cluster(*, fleet: Fleet, catalog: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The engine ``cluster`` section a fleet stands for (GPU model from its server's catalog item)."""
    cluster: dict[str, Any] = {
        "gpus": fleet.gpus,
        "gpus_per_node": fleet.gpus_per_node,
        "nics_per_node": fleet.nics_per_node,
        "nic_gbps": fleet.nic_gbps,
        "fabric": fleet.fabric,
        "topology": fleet.topology,
        "oversubscription": fleet.oversubscription,
    }
    server = (catalog or {}).get(fleet.server_model)
    if server and server.get("specs", {}).get("gpu"):
        cluster["gpu"] = server["specs"]["gpu"]
    return cluster


def build_document(
    *,
    workload: Workload,
    fleet: Fleet | None,
    cluster: Mapping[str, Any] | None,
    costs: Mapping[str, Any] | None,
    uncertainty: Mapping[str, Any] | None,
    catalog: Mapping[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": copy.deepcopy(workload.model or {}),
        "training": copy.deepcopy(workload.training or {}),
        "parallelism": copy.deepcopy(workload.parallelism if workload.parallelism not in (None, {}) else "auto"),
        "cluster": {**(fleet_cluster(fleet=fleet, catalog=catalog) if fleet else {}), **(cluster or {})},
    }
    if costs:
        doc["costs"] = copy.deepcopy(dict(costs))
    if uncertainty:
        doc["uncertainty"] = copy.deepcopy(dict(uncertainty))
    return doc


def scenario_resolve(
    *, scenario: Scenario
) -> tuple[dict[str, Any], CatalogVersion | None, dict[str, dict[str, Any]]]:
    """(engine document, catalog version used, catalog values) for a scenario, right now."""
    version, values = catalog_resolve(catalog=scenario.catalog, pinned_version=scenario.pinned_version)
    doc = build_document(
        workload=scenario.workload, fleet=scenario.fleet, cluster=scenario.cluster, costs=scenario.costs,
        uncertainty=scenario.uncertainty, catalog=values,
    )
    return doc, version, values


def scenario_document(*, scenario: Scenario) -> dict[str, Any]:
    """The full engine document the scenario resolves to (what a run would snapshot)."""
    return scenario_resolve(scenario=scenario)[0]


def set_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, creating intermediate objects."""
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = value


# --- Scenario builder ----------------------------------------------------------------------------------
def gpu_server_item(
    *, gpu: str, catalog: Mapping[str, Mapping[str, Any]], server: str | None = None
) -> dict[str, Any] | None:
    """The catalog server item the cost model prices ``gpu`` with (``costs.server`` if given, else the
    engine's default server for that GPU, else the first server holding it); None when there is none."""
    from simulations.engine.fabric import DEFAULT_SERVER_FOR_GPU

    key = server or DEFAULT_SERVER_FOR_GPU.get(gpu)
    if key is None:
        matches = sorted(k for k, v in catalog.items()
                         if v.get("kind") == "server" and (v.get("specs") or {}).get("gpu") == gpu)
        key = matches[0] if matches else None
    item = catalog.get(key) if key else None
    return dict(item) if item and item.get("kind") == "server" else None


def scenario_save(
    *,
    team: Team,
    user: Any,
    scenario: Scenario | None = None,
    name: str,
    description: str = "",
    workload_name: str,
    model: Mapping[str, Any],
    training: Mapping[str, Any],
    parallelism: Mapping[str, Any] | str,
    cluster: Mapping[str, Any] | None,
    costs: Mapping[str, Any] | None,
    uncertainty: Mapping[str, Any] | None = None,
    fleet: Fleet | None = None,
    watched: bool = False,
) -> Scenario:
    """Create (``scenario`` None) or update a scenario together with its workload, in one transaction.

    This is what the scenario builder saves: the workload (model, training, parallelism) and the scenario
    (a fleet and/or an ad-hoc cluster, costs with optional ranges, uncertainty options). The resolved
    document is validated with the engine's rules before anything is written; errors name the document
    field (``model.heads``, ``cluster.gpus``, ``costs.pue``...). When the scenario's workload is shared with
    other scenarios, an update writes a new workload instead of changing theirs.
    """
    if scenario is not None and scenario.team_id != team.pk:
        raise _err("scenario", f"scenario {scenario.pk} not found")
    if fleet is not None and fleet.team_id != team.pk:
        raise _err("fleet", f"fleet {fleet.pk} not found")
    workload_fields: dict[str, Any] = {
        "name": workload_name, "model": copy.deepcopy(dict(model)), "training": copy.deepcopy(dict(training)),
        "parallelism": copy.deepcopy(parallelism if isinstance(parallelism, str) else dict(parallelism)),
    }
    _validate_workload(workload_fields)
    scenario_fields: dict[str, Any] = {
        "name": name, "description": description, "fleet": fleet, "cluster": dict(cluster or {}),
        "costs": copy.deepcopy(dict(costs or {})), "uncertainty": copy.deepcopy(dict(uncertainty or {})),
        "watched": bool(watched),
    }
    if not str(name or "").strip():
        raise _err("name", "This field is required.")
    # Validate the whole document up front, so a bad input never leaves a half-written workload behind.
    draft = Workload(team=team, **workload_fields)
    _validate_scenario(team_id=team.pk, data={**scenario_fields, "workload": draft}, current=scenario)
    _validate_scenario_document(data={**scenario_fields, "workload": draft}, current=scenario)
    with transaction.atomic():
        if scenario is None:
            workload = workload_create(team=team, user=user, **workload_fields)
            return scenario_create(team=team, user=user, workload=workload, **scenario_fields)
        scenario = Scenario.objects.select_for_update().select_related("workload").get(pk=scenario.pk)
        shared = scenario.workload.scenarios.exclude(pk=scenario.pk).exists()
        if shared:
            workload = workload_create(team=team, user=user, **workload_fields)
        else:
            workload = workload_update(workload=scenario.workload, user=user, **workload_fields)
        return scenario_update(scenario=scenario, user=user, workload=workload, **scenario_fields)
