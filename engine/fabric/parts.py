"""Catalog parts of a fabric: the switch's port count at a link speed, and the optics and cables a link needs.

Used by :mod:`engine.fabric.sizing`, which sizes the tree from them.
"""

from __future__ import annotations

from typing import Any

from engine.catalog import CatalogError, CatalogItem, CatalogItems, items_of_kind


class FabricError(CatalogError):
    """The requested fabric cannot be built (``.field`` names the scenario field)."""



def _specs(item: CatalogItem) -> dict[str, Any]:
    specs = item.get("specs") or {}
    return dict(specs)


def switch_radix(item: CatalogItem, link_gbps: float, field_name: str = "cluster.nic_gbps") -> tuple[int, float]:
    """(ports, port speed) of a switch for links of ``link_gbps``: exact breakout, else the slowest faster port."""
    specs = _specs(item)
    options = {float(g): int(n) for g, n in (specs.get("breakout") or {}).items()}
    if not options:
        options = {float(specs["port_gbps"]): int(specs["radix"])}
    if link_gbps in options:
        return options[link_gbps], link_gbps
    faster = sorted(g for g in options if g >= link_gbps)
    if not faster:
        top = max(options)
        raise FabricError(field_name, f"switch {item['key']} ports top out at {top:g} Gb/s; NIC is {link_gbps:g} Gb/s")
    return options[faster[0]], faster[0]


def _pick_transceiver(catalog: CatalogItems | None, gbps: float, link_gbps: float, reach: str, nic_side: bool,
                      field_name: str) -> CatalogItem:
    cands = list(items_of_kind("transceiver", catalog).values())
    if nic_side:
        pool = [c for c in cands if float(_specs(c).get("gbps", 0)) == gbps and int(_specs(c).get("links", 1)) == 1]
    else:
        pool = [c for c in cands if float(_specs(c).get("gbps", 0)) == gbps]
        exact = [c for c in pool if float(_specs(c).get("link_gbps", 0)) == link_gbps]
        pool = exact or pool
    if not pool:
        where = "NIC" if nic_side else "switch cage"
        raise FabricError(field_name, f"no {gbps:g} Gb/s transceiver for the {where} in the catalog")
    same_reach = [c for c in pool if _specs(c).get("reach") == reach]
    if same_reach:
        pool = same_reach
    elif reach == "sr":  # DR reaches further; it can stand in for SR
        pool = [c for c in pool if _specs(c).get("reach") == "dr"] or pool
    return min(pool, key=lambda c: (float(c.get("unit_price_usd") or 0.0), str(c["key"])))


def _pick_copper(catalog: CatalogItems | None, cage_gbps: float, link_gbps: float,
                 field_name: str) -> tuple[CatalogItem, int]:
    """A copper cable for switch cages of ``cage_gbps`` carrying links of ``link_gbps``; (item, links per cable)."""
    cands = [c for c in items_of_kind("cable", catalog).values() if _specs(c).get("media") == "copper"]
    split = [c for c in cands if float(_specs(c).get("gbps", 0)) == cage_gbps
             and float(_specs(c).get("link_gbps", 0)) == link_gbps]
    if split:
        item = min(split, key=lambda c: float(c.get("unit_price_usd") or 0.0))
        return item, int(_specs(item).get("links", 1))
    straight = [c for c in cands if float(_specs(c).get("gbps", 0)) == link_gbps and int(_specs(c).get("links", 1)) == 1]
    if straight:
        return min(straight, key=lambda c: float(c.get("unit_price_usd") or 0.0)), 1
    faster = [c for c in cands if float(_specs(c).get("gbps", 0)) >= link_gbps and int(_specs(c).get("links", 1)) == 1]
    if faster:  # a faster cable runs at the lower rate
        return min(faster, key=lambda c: (float(_specs(c).get("gbps", 0)), float(c.get("unit_price_usd") or 0.0))), 1
    raise FabricError(field_name, f"no copper cable for {link_gbps:g} Gb/s links in the catalog")


def _pick_fibre(catalog: CatalogItems | None, field_name: str) -> CatalogItem:
    cands = [c for c in items_of_kind("cable", catalog).values() if _specs(c).get("media") == "fibre"]
    if not cands:
        raise FabricError(field_name, "no fibre cable in the catalog")
    return min(cands, key=lambda c: float(c.get("unit_price_usd") or 0.0))
