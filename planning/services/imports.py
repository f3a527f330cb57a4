"""CSV imports: catalog items and fleets, parsed defensively, all or nothing with per-row errors."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from rest_framework import exceptions

from accounts.models import Team
from planner.api.errors import PayloadTooLarge
from planning.models import Catalog, CatalogVersion, Fleet
from planning.services.catalogs import _clean_item, _require_team_catalog, catalog_edit
from planning.services.common import FLEET_FIELDS, _err
from planning.services.fleets import _validate_fleet, fleet_create

MAX_CSV_ROWS = 10_000
MAX_CSV_FIELD_CHARS = 20_000


def _read_csv(file: Any) -> list[dict[str, str]]:
    """Parse an uploaded CSV defensively: size, encoding, NUL bytes, field and row limits → 400/413."""
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
