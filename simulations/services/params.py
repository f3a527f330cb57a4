"""Validation of the per-kind run options (``params``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import exceptions

from simulations.models import RunKind
from simulations.services.fabric import FABRIC_PARAMS, clean_fabric_params
from simulations.services.fleet import FLEET_PARAMS, clean_fleet_params

ALLOWED_PARAMS: dict[str, set[str]] = {"predict": set(), "search": {"top_k"}, "tco": {"monte_carlo", "sensitivity", "seed"},
                                       "fabric": set(FABRIC_PARAMS), "fleet": set(FLEET_PARAMS)}


def check_kind(kind: str) -> None:
    if kind not in RunKind.values:
        raise exceptions.ValidationError({"kind": [f"must be one of {', '.join(RunKind.values)}"]})


def bounded_int(value: Any, field: str, lo: int, hi: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise exceptions.ValidationError({field: ["must be an integer"]}) from None
    if not lo <= number <= hi:
        raise exceptions.ValidationError({field: [f"must be between {lo} and {hi}"]})
    return number


def clean_params(kind: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    params = dict(params or {})
    allowed = ALLOWED_PARAMS[kind]
    unknown = set(params) - allowed
    if unknown:
        raise exceptions.ValidationError({f"params.{sorted(unknown)[0]}": [f"not an option of a {kind} run"]})
    if kind == RunKind.FABRIC:
        return clean_fabric_params(params)
    if kind == RunKind.FLEET:
        return clean_fleet_params(params)
    out: dict[str, Any] = {}
    if "top_k" in params:
        out["top_k"] = bounded_int(params["top_k"], "params.top_k", 1, 50)
    if "monte_carlo" in params:
        out["monte_carlo"] = bounded_int(params["monte_carlo"], "params.monte_carlo", 0, 100_000)
    if "seed" in params:
        out["seed"] = bounded_int(params["seed"], "params.seed", 0, 2**31 - 1)
    if "sensitivity" in params:
        out["sensitivity"] = bool(params["sensitivity"])
    return out
