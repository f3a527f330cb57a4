"""Ranges: any number under ``costs``, ``cluster`` or ``training`` may be written as ``{low, likely, high}``.

::

    {"low": 0.06, "likely": 0.08, "high": 0.12, "dist": "pert"}     # dist optional: triangular (default) | pert

``likely`` defaults to the midpoint. The parser (:func:`engine.document.parse.parse_scenario`) finds and
checks every range here, builds the scenario at the ``likely`` values and keeps the ranges on the ScenarioSpec;
:mod:`.uncertainty` samples them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from engine.errors import INVALID, NOT_A_CHOICE, OUT_OF_RANGE, UNKNOWN_KEY, WRONG_TYPE, ScenarioError
from engine.schema.bounds import MAX_RANGES, check_field, check_number, check_work
from engine.schema.enums import Distribution
from engine.schema.fields import RANGED_SECTIONS, field, keys
from engine.schema.types import Range

RANGE_KEYS = {"low", "likely", "high", "dist"}
DISTRIBUTIONS = Distribution.values()
SECTIONS = RANGED_SECTIONS
UNCERTAINTY_KEYS = keys("uncertainty")


def is_range(value: Any) -> bool:
    return isinstance(value, Mapping) and "low" in value and "high" in value and set(value) <= RANGE_KEYS


def _num(value: Any, field: str) -> float:
    """A range end, checked against the bound of its field (:mod:`.bounds`; ``<field>.low`` has ``<field>``'s)."""
    base, _, end = field.rpartition(".")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(field, f"must be a number, got {value!r}", WRONG_TYPE)
    try:
        return float(check_field(value, base))  # the error names the ranged field, as for a plain number
    except LookupError:  # a field with no numeric bound: finite is all that can be said
        return check_number(value, field)
    except ScenarioError as exc:
        raise ScenarioError(base, f"range {end}: {exc.message}", exc.code) from exc


def parse_range(value: Mapping[str, Any], path: tuple[str, ...], default_dist: str = "triangular") -> Range:
    field = ".".join(path)
    low = _num(value["low"], f"{field}.low")
    high = _num(value["high"], f"{field}.high")
    likely = _num(value["likely"], f"{field}.likely") if "likely" in value else (low + high) / 2.0
    if low > high:
        raise ScenarioError(field, f"range low {low:g} > high {high:g}", INVALID)
    if not low <= likely <= high:
        raise ScenarioError(field, f"likely {likely:g} is outside [{low:g}, {high:g}]", INVALID)
    if low < 0:
        raise ScenarioError(field, f"must be >= 0, got low {low:g}", OUT_OF_RANGE)
    dist = value.get("dist", default_dist)
    if dist not in DISTRIBUTIONS:
        raise ScenarioError(f"{field}.dist", f"must be one of {', '.join(DISTRIBUTIONS)}, got {dist!r}", NOT_A_CHOICE)
    integer = all(isinstance(value.get(k), int) and not isinstance(value.get(k), bool)
                  for k in ("low", "high") if k in value) and isinstance(value.get("likely", 0), int)
    return Range(path, low, likely, high, str(dist), integer)


def _default_dist(scenario: Mapping[str, Any]) -> str:
    unc = scenario.get("uncertainty") or {}
    if not isinstance(unc, Mapping):
        raise ScenarioError("uncertainty", "must be an object", WRONG_TYPE)
    for key in unc:
        if key not in UNCERTAINTY_KEYS:
            raise ScenarioError(f"uncertainty.{key}", f"unknown key; allowed: {', '.join(sorted(UNCERTAINTY_KEYS))}",
                                UNKNOWN_KEY)
    for key in ("samples", "seed", "bins"):
        if key in unc:
            check_field(unc[key], f"uncertainty.{key}")
    dist = unc.get("distribution", field("uncertainty.distribution").default)
    if dist not in DISTRIBUTIONS:
        raise ScenarioError("uncertainty.distribution", f"must be one of {', '.join(DISTRIBUTIONS)}, got {dist!r}",
                            NOT_A_CHOICE)
    return str(dist)


def find_ranges(scenario: Mapping[str, Any]) -> dict[str, Range]:
    """Every range under costs/cluster/training, validated, keyed by dotted field name."""
    default = _default_dist(scenario)
    found: dict[str, Range] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if is_range(node):
            r = parse_range(node, path, default)
            found[r.field] = r
        elif isinstance(node, Mapping):
            for key, child in node.items():
                walk(child, (*path, str(key)))

    for section in SECTIONS:
        if section in scenario and scenario[section] is not None:
            walk(scenario[section], (section,))
    check_work("ranges", len(found), MAX_RANGES, "scenario", hint="pin some inputs to single values")
    return found


def set_path(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = doc
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = dict(child) if isinstance(child, Mapping) else {}
            node[key] = child
        node = child
    node[path[-1]] = value


def get_path(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _plain(doc: Mapping[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(dict(doc))


def likely_scenario(scenario: Mapping[str, Any], ranges: Mapping[str, Range] | None = None) -> dict[str, Any]:
    """A copy of ``scenario`` with every range replaced by its ``likely`` value."""
    ranges = find_ranges(scenario) if ranges is None else ranges
    doc = _plain(scenario)
    for r in ranges.values():
        set_path(doc, r.path, r.value(r.likely))
    return doc
