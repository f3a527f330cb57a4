"""Validation of the per-kind run options (``params``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import ValidationError, engine_error
from engine.errors import ScenarioError
from engine.schema.bounds import check_int
from simulations.models import RunKind
from simulations.services.fabric import FABRIC_PARAMS, clean_fabric_params
from simulations.services.fleet import FLEET_PARAMS, clean_fleet_params

ALLOWED_PARAMS: dict[str, set[str]] = {"predict": set(), "search": {"top_k"}, "tco": {"monte_carlo", "sensitivity", "seed"},
                                       "fabric": set(FABRIC_PARAMS), "fleet": set(FLEET_PARAMS)}


def check_kind(kind: str) -> None:
    if kind not in RunKind.values:
        raise ValidationError({"kind": [f"must be one of {', '.join(RunKind.values)}"]})


def bounded_int(value: Any, field: str, lo: int | None = None, hi: int | None = None) -> int:
    """A strict integer (no bool, no string, no fraction, finite) within the bounds table's limits for ``field``
    (or ``lo``/``hi`` when given); a DRF 400 naming the field otherwise."""
    try:
        return check_int(value, field, lo, hi)
    except ScenarioError as exc:
        raise engine_error(exc, field) from None


def strict_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError({field: [f"must be true or false, got {value!r}"[:200]]})
    return value


def clean_params(kind: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    params = dict(params or {})
    allowed = ALLOWED_PARAMS[kind]
    unknown = set(params) - allowed
    if unknown:
        raise ValidationError({f"params.{sorted(unknown)[0]}": [f"not an option of a {kind} run"]})
    if kind == RunKind.FABRIC:
        return clean_fabric_params(params)
    if kind == RunKind.FLEET:
        return clean_fleet_params(params)
    out: dict[str, Any] = {}
    for name in ("top_k", "monte_carlo", "seed"):  # bounds: engine/schema/bounds.py, params.*
        if name in params:
            out[name] = bounded_int(params[name], f"params.{name}")
    if "sensitivity" in params:
        out["sensitivity"] = strict_bool(params["sensitivity"], "params.sensitivity")
    return out


# What to change when a run of a kind runs out of its time budget: settings that kind has (issue #23: a capacity
# plan has replications and a horizon, not params.monte_carlo). Run failures quote it after "exceeded its time
# budget of N s"; submissions are refused earlier, by the same reasoning, from each kind's estimate.
BUDGET_HINTS: dict[str, str] = {
    RunKind.PREDICT: 'fix some "auto" settings (parallelism degrees, training.micro_batch)',
    RunKind.SEARCH: 'fix some parallelism degrees or training.micro_batch instead of "auto", or lower params.top_k',
    RunKind.TCO: 'fix some "auto" settings, lower params.monte_carlo or turn params.sensitivity off',
    RunKind.FABRIC: 'lower params.seeds or params.ranks, simulate a smaller group or fewer QPs, or pick one '
                    'params.routing instead of "compare"',
    RunKind.FLEET: "lower params.replications (or the plan's replications), set params.search to false, or "
                   "shorten the plan's horizon_days or its arrival rates",
}


def budget_hint(kind: str) -> str:
    """The settings of a ``kind`` run that shorten it (for 'exceeded its time budget' messages)."""
    return BUDGET_HINTS.get(kind, 'fix some "auto" settings')
