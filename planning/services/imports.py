"""CSV imports: catalog items and fleets, parsed defensively, all or nothing with per-row errors."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction

from accounts.models import Team
from core.errors import PayloadTooLarge, ValidationError
from planning import changelog
from planning.models import Catalog, CatalogVersion, Fleet
from planning.services.catalogs import (
    _clean_item,
    _require_team_catalog,
    catalog_edit,
    catalog_resolve,
    catalog_values,
)
from planning.services.common import FLEET_FIELDS, _err
from planning.services.fleets import _validate_fleet

MAX_CSV_ROWS = 10_000
MAX_CSV_FIELD_CHARS = 20_000


def _binary_stream(file: Any, limit: int) -> IO[bytes]:
    """The upload as a binary stream, refusing anything over ``limit`` bytes before reading it."""
    size = getattr(file, "size", None)
    if size is not None and size > limit:
        raise PayloadTooLarge(f"file: {size} bytes is over the {limit}-byte upload limit")
    if isinstance(file, bytes | str):
        data = file.encode("utf-8") if isinstance(file, str) else file
        if len(data) > limit:
            raise PayloadTooLarge(f"file: over the {limit}-byte upload limit")
        return io.BytesIO(data)
    if size is None:  # unknown size: read at most limit + 1 bytes
        data = file.read(limit + 1)
        if len(data) > limit:
            raise PayloadTooLarge(f"file: over the {limit}-byte upload limit")
        return io.BytesIO(data)
    stream = getattr(file, "file", file)
    if hasattr(stream, "seek"):
        stream.seek(0)
    return stream  # type: ignore[no-any-return]


def iter_csv(file: Any) -> Iterator[tuple[int, dict[str, str]]]:
    """Stream an uploaded CSV row by row: ``(line, {header: cell})``, checked as the rows arrive.

    Size, encoding (UTF-8, BOM allowed), NUL bytes, row and cell limits → 400/413 naming the line. Nothing is
    materialised beyond the current row, so the cost is one pass over the file.
    """
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2 * 1024 * 1024
    text = io.TextIOWrapper(_binary_stream(file, limit), encoding="utf-8-sig", newline="")
    reader = csv.DictReader(text)
    count = 0
    try:
        if not reader.fieldnames:
            raise _err("file", "is empty or has no header row")
        if any("\x00" in (name or "") for name in reader.fieldnames):
            raise _err("file", "contains NUL bytes; upload a UTF-8 text CSV")
        for row in reader:
            count += 1
            if count > MAX_CSV_ROWS:
                raise _err("file", f"has more than {MAX_CSV_ROWS} rows; split it")
            if any(v is not None and not isinstance(v, str) for v in row.values()) or None in row:
                raise _err(f"rows.{reader.line_num}", "has more cells than the header")
            if any(len(v or "") > MAX_CSV_FIELD_CHARS for v in row.values()):
                raise _err(f"rows.{reader.line_num}", f"a cell is longer than {MAX_CSV_FIELD_CHARS} characters")
            if any("\x00" in (v or "") for v in row.values()):
                raise _err("file", "contains NUL bytes; upload a UTF-8 text CSV")
            yield count + 1, {(k or "").strip(): (v or "").strip() for k, v in row.items() if k is not None}
    except UnicodeDecodeError:
        raise _err("file", "must be UTF-8 encoded CSV") from None
    except csv.Error as exc:
        if "NUL" in str(exc) or "null byte" in str(exc).lower():
            raise _err("file", "contains NUL bytes; upload a UTF-8 text CSV") from None
        raise _err("file", f"is not valid CSV (line {reader.line_num}): {exc}") from None
    finally:
        text.detach()  # leave the upload's own stream open for Django to clean up


def _read_csv(file: Any) -> list[dict[str, str]]:
    """All rows of an uploaded CSV (see :func:`iter_csv`)."""
    return [row for _, row in iter_csv(file)]


def _row_errors(rows: Iterable[dict[str, str]], clean: Callable[[dict[str, str]], Any]) -> tuple[list[Any], dict[str, Any]]:
    """Clean every row; collect errors as ``{"rows": {"<line>": {field: [msg]}}}`` (line 2 = first data row)."""
    cleaned: list[Any] = []
    errors: dict[str, Any] = {}
    for index, row in enumerate(rows):
        line = str(index + 2)
        try:
            cleaned.append(clean(row))
        except ValidationError as exc:
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
        raise ValidationError({"rows": errors})

    def change(current: dict[str, dict[str, Any]]) -> None:
        for item in items:
            current[item["key"]] = item

    return catalog_edit(catalog=catalog, user=user, change=change, note=note or f"imported {len(items)} items")


def _clean_fleet_row(row: dict[str, str], servers: Mapping[str, Any] | None = None) -> dict[str, Any]:
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
        raise ValidationError(errors)
    _validate_fleet({k: v for k, v in data.items() if k not in errors}, catalog=servers)
    return data


def fleets_import(*, team: Team, user: Any, file: Any) -> list[Fleet]:
    """Create fleets from CSV (columns = fleet fields). All or nothing, with per-row errors.

    Streamed and bulk-inserted: the CSV is read row by row, each row is checked against one resolved catalog
    (not one catalog lookup per row), then every fleet and its change-log row are inserted with two bulk
    INSERTs in one transaction — 10,000 rows in a few seconds (benchmarks/bench_import.py).
    """
    servers = catalog_values(version=catalog_resolve(catalog=None)[0])
    fleets: list[Fleet] = []
    errors: dict[str, Any] = {}
    for line, row in iter_csv(file):
        try:
            data = _clean_fleet_row(row, servers)
            fleet = Fleet(team=team, created_by=user, updated_by=user, **data)
            fleet.full_clean(exclude=["team", "created_by", "updated_by"], validate_unique=False)
            fleets.append(fleet)
        except ValidationError as exc:
            errors[str(line)] = exc.detail
        except DjangoValidationError as exc:
            errors[str(line)] = exc.message_dict
    if errors:
        raise ValidationError({"rows": errors})
    if not fleets:
        raise _err("file", "has no data rows")
    with transaction.atomic():
        created = Fleet.objects.bulk_create(fleets, batch_size=1000)
        changelog.record_created(objs=created, object_type="fleet", user=user)
    return created
