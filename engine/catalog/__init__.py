"""The default vendor catalog: the single source of hardware and cost figures.

Every JSON file in ``engine/catalog/data/`` holds a list of catalog items under ``"items"``.
The engine reads specs from here; the Django command ``load_default_catalog`` loads the very same
files into the database as the global read-only catalog. One place, not two copies.

Item shape (all files)::

    {
      "key": "H100-SXM",                 # unique across the catalog
      "kind": "gpu" | "server" | "nic" | "switch" | "transceiver" | "cable" | "facility" | "reliability",
      "name": "NVIDIA H100 SXM5 80GB",
      "unit_price_usd": 27500.0 | null,  # price of one unit
      "power_w": 700.0 | null,           # typical/max power of one unit
      "specs": {...},                    # kind-specific numbers, units in the names (tflops, gbps, gb, w)
      "source": "where each figure comes from, or how it was estimated (with date)"
    }

A *catalog* at run time is ``dict[key, item]``; callers (the Django services) may pass their own
catalog version (same shape) to every engine entry point, so stored runs snapshot the values used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"

CatalogItem = dict[str, Any]
CatalogItems = Mapping[str, CatalogItem]

KINDS = ("gpu", "server", "nic", "switch", "transceiver", "cable", "facility", "reliability")


class CatalogError(ValueError):
    """A catalog key is unknown or an item is malformed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _load_files() -> dict[str, CatalogItem]:
    items: dict[str, CatalogItem] = {}
    for path in sorted(DATA_DIR.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for item in doc.get("items", []):
            key = item["key"]
            if key in items:
                raise CatalogError("key", f"duplicate catalog key {key!r} in {path.name}")
            if item.get("kind") not in KINDS:
                raise CatalogError("kind", f"item {key!r} in {path.name} has unknown kind {item.get('kind')!r}")
            items[key] = item
    return items


@lru_cache(maxsize=1)
def _default() -> dict[str, CatalogItem]:
    return _load_files()


def default_catalog() -> dict[str, CatalogItem]:
    """A fresh copy of the default catalog (safe to mutate)."""
    return json.loads(json.dumps(_default()))


@lru_cache(maxsize=len(KINDS) + 1)
def _default_of_kind(kind: str) -> dict[str, CatalogItem]:
    return {k: v for k, v in _default().items() if v.get("kind") == kind}


def items_of_kind(kind: str, catalog: CatalogItems | None = None) -> dict[str, CatalogItem]:
    """Items of ``kind`` (a new dict; the default catalog's per-kind index is built once)."""
    if catalog is None:
        return dict(_default_of_kind(kind))
    return {k: v for k, v in catalog.items() if v.get("kind") == kind}


def get_item(key: str, kind: str, field: str, catalog: CatalogItems | None = None) -> CatalogItem:
    """Look up ``key`` of ``kind``; raise CatalogError naming ``field`` when absent."""
    cat = catalog if catalog is not None else _default()
    item = cat.get(key)
    if item is None or item.get("kind") != kind:
        known = ", ".join(sorted(items_of_kind(kind, cat)))
        raise CatalogError(field, f"unknown {kind} {key!r}; known: {known}")
    return item
