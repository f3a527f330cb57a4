"""What a run costs, as finance reads it: exact cents, rounded once per line item, totals that are sums of lines.

A TCO result's line items become a cost statement (:func:`cost_statement`): one-off capex and per-year opex in
separate columns, each line's part of the annual TCO, every amount in whole cents where the line is read, every
total the sum of those cents, and each distinct source once as a numbered note. :func:`run_figures` is every
figure of a run as exports, comparisons and the page state it: money in exact cents, and the headline capex,
annual opex and TCO equal to the statement's totals, so nothing needs reconciling by hand.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from simulations import metrics as registry
from simulations.models import SimulationRun

OPEX_CATEGORIES = ("power", "maintenance", "staff")  # line items of old results that do not say their basis


def _flatten(node: Any, prefix: str = "", out: dict[str, float] | None = None, depth: int = 0) -> dict[str, float]:
    out = {} if out is None else out
    if depth > 5:
        return out
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("line_items", "alternatives", "sensitivity", "samples"):
                continue
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), out, depth + 1)
    elif isinstance(node, bool) or (isinstance(node, int | float) and math.isfinite(float(node))):
        out[prefix] = float(node)
    return out


def run_metrics(run: SimulationRun | None) -> dict[str, float]:
    """Every numeric scalar of a run's result, by dotted path, as stored (lists such as line items excluded)."""
    if run is None or not run.result:
        return {}
    return _flatten(run.result)


# --- money: exact cents, rounded once per line --------------------------------------------------------------
def to_cents(amount: Any) -> int:
    """An amount of USD in whole cents (half to even on the exact binary value, as ``round(usd, 2)``)."""
    return int((Decimal(float(amount)) * 100).to_integral_value(ROUND_HALF_EVEN))


def usd(cents: int) -> float:
    return cents / 100  # the double nearest to the cents: prints with at most two decimals, never noise


def price(value: Any) -> Any:
    """A unit price to the millionth of a dollar: a price may be a fraction of a cent ($0.0812/kWh) but never
    carries the float noise of the engine's arithmetic (289451.51999999996 is 289451.52)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return value
    return float(Decimal(float(value)).quantize(Decimal("0.000001"), ROUND_HALF_EVEN))


def _basis(item: Mapping[str, Any]) -> str:
    basis = item.get("basis")
    if basis in ("capex", "opex"):
        return str(basis)
    return "opex" if item.get("category") in OPEX_CATEGORIES else "capex"


def cost_statement(result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A TCO result's line items as finance reads them: one-off (``capex_usd``) and per-year
    (``opex_usd_per_year``) amounts, and each line's part of the annual TCO (``tco_usd_per_year``: capex through
    the capital recovery factor, or the opex itself), each in exact cents; totals that are the sums of those
    cents; every distinct source once, as a numbered note. None when the result has no line items."""
    items = registry.dig(result or {}, "tco.line_items")
    if not isinstance(items, list) or not items:
        return None
    notes: dict[str, int] = {}
    lines: list[dict[str, Any]] = []
    capex = opex = tco = network_capex = 0
    by_category: dict[str, int] = {}
    annual_known = all(isinstance(it, Mapping) and isinstance(it.get("annual_usd"), int | float) for it in items)
    for it in items:
        if not isinstance(it, Mapping):
            continue
        total = to_cents(it.get("total_usd") or 0.0)
        basis = _basis(it)
        annual = to_cents(it["annual_usd"]) if annual_known else (total if basis == "opex" else 0)
        source = str(it.get("source") or "").strip()
        note = notes.setdefault(source, len(notes) + 1) if source else None
        if basis == "capex":
            capex += total
            network_capex += total if it.get("network") else 0
        else:
            opex += total
        tco += annual
        category = str(it.get("category") or "")
        by_category[category] = by_category.get(category, 0) + annual
        lines.append({
            "category": category, "item": str(it.get("item") or ""), "quantity": it.get("quantity"),
            "unit_price_usd": price(it.get("unit_price_usd")), "basis": "one-off" if basis == "capex" else "per year",
            "capex_usd": usd(total) if basis == "capex" else None,
            "opex_usd_per_year": usd(total) if basis == "opex" else None,
            "tco_usd_per_year": usd(annual) if annual_known else None,
            "note": note,
        })
    return {
        "lines": lines,
        "totals": {"capex_usd": usd(capex), "opex_usd_per_year": usd(opex),
                   "tco_usd_per_year": usd(tco) if annual_known else None},
        "network_capex_usd": usd(network_capex),
        "annual_by_category_usd": {k: usd(v) for k, v in by_category.items()} if annual_known else {},
        "notes": [{"note": n, "source": s} for s, n in notes.items()],
        # line items of this engine say their basis: the headline figures are the sums of their cents
        "reconciles": all(isinstance(it, Mapping) and it.get("basis") in ("capex", "opex") for it in items),
    }


def run_figures(run: SimulationRun | None) -> dict[str, float]:
    """Every numeric figure of a run as exports, comparisons and the page state it: money in exact cents and, for
    a TCO result whose line items say their basis, the headline capex, annual opex, annual TCO, network capex and
    annual cost per category equal to the sums of the line items' cents (rounding once per line, at the line)."""
    figures = run_metrics(run)
    for path, value in figures.items():
        if registry.kind(path) == registry.MONEY:
            figures[path] = usd(to_cents(value))
    statement = cost_statement(run.result) if run is not None else None
    if statement is not None and statement["reconciles"]:
        totals = statement["totals"]
        exact = {"tco.capex_usd": totals["capex_usd"], "tco.annual_opex_usd": totals["opex_usd_per_year"],
                 "tco.annual_tco_usd": totals["tco_usd_per_year"], "tco.network_capex_usd": statement["network_capex_usd"],
                 **{f"tco.annual_by_category_usd.{k}": v for k, v in statement["annual_by_category_usd"].items()}}
        for path, value in exact.items():
            if path in figures and value is not None:
                figures[path] = value
    return figures
