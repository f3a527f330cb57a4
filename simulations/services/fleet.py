"""Capacity-plan runs (issue #14): the ``fleet`` run kind's options and its one engine call.

A plan run is an ordinary simulation run (same claim, lease, reaper, idempotency, progress and cancel): its
snapshot holds the plan document and the catalog values; the worker simulates ``params.replications`` seeds
(``params.seed``, ``seed + 1``, ...) with :func:`engine.fleet.simulate_replications` and, when the
plan lists candidates and ``params.search`` is not false, the purchase search. Each replication done is a
progress step, so a cancelled run stops at its next replication.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from core.errors import ValidationError
from engine.budget import checkpoint
from engine.errors import ScenarioError
from engine.fleet.core import simulate_replications
from engine.fleet.plan import MAX_REPLICATIONS, MAX_SEARCH_SIMULATIONS, parse_plan
from engine.fleet.search import search_purchases

FLEET_PARAMS = {"replications", "seed", "search"}
MAX_RUN_REPLICATIONS = 200  # one run must finish inside the worker's time limit (~1-3 s per replication)


def _err(field: str, message: str) -> ValidationError:
    return ValidationError({f"params.{field}": [message]})


def clean_fleet_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Validated options of a plan run (400 naming ``params.<field>``)."""
    out: dict[str, Any] = {}
    for name, hi in (("replications", min(MAX_REPLICATIONS, MAX_RUN_REPLICATIONS)), ("seed", 2**31 - 1)):
        if name in params:
            v = params[name]
            if isinstance(v, bool) or not isinstance(v, int | float) or (isinstance(v, float) and not v.is_integer()):
                raise _err(name, "must be an integer")
            lo = 1 if name == "replications" else 0
            if not lo <= int(v) <= hi:
                raise _err(name, f"must be between {lo} and {hi}")
            out[name] = int(v)
    if "search" in params:
        if not isinstance(params["search"], bool):
            raise _err("search", "must be true or false")
        out["search"] = params["search"]
    return out


def compute_fleet(document: dict[str, Any], catalog: dict[str, Any] | None, params: Mapping[str, Any],
                  progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Replications (P10/P50/P90), the first replication in full, and the purchase search when asked."""
    cat = catalog or None
    plan = parse_plan(document, cat)
    n = int(params.get("replications", plan.replications))
    seed = int(params.get("seed", 0))
    search = bool(params.get("search", True)) and bool(plan.candidates)
    total = n + (n * (len(plan.candidates) + 1) if search else 0)
    if search and n * (len(plan.candidates) + 1) > MAX_SEARCH_SIMULATIONS:
        raise ScenarioError("params.replications", f"{n} replications x {len(plan.candidates) + 1} purchase "
                            f"options exceed {MAX_SEARCH_SIMULATIONS:,} simulations")

    def step(offset: int) -> Callable[[int, int], None]:
        def report(done: int, _total: int) -> None:
            checkpoint()  # the run's work budget: time limit, cancellation, lease renewal
            if progress is not None:
                progress(offset + done, total)
        return report

    out = simulate_replications(plan, n, seed, progress=step(0), catalog=cat)
    if search:
        out["purchase"] = search_purchases(plan, n, seed, progress=step(n), catalog=cat)
    out["plan"] = {"name": plan.name, "horizon_days": plan.horizon_days, "clusters": [c.name for c in plan.clusters],
                   "replications": n, "seed": seed}
    return out
