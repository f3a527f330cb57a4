"""Fleet capacity planning: a discrete-event simulation of clusters, jobs, failures and schedulers over months.

Pure Python + numpy (no Django). Entry point (a contract): ``simulate_fleet(plan: dict, seed: int = 0) -> dict``.
``simulate_replications`` gives P10/P50/P90 over seeds; ``search_purchases`` finds the cheapest purchase that
meets the deadlines. The model, its assumptions and the plan document: docs/fleet-model.md.
"""

from simulations.engine.fleet.core import (
    Prepared,
    compact,
    prepare,
    simulate_fleet,
    simulate_prepared,
    simulate_replications,
)
from simulations.engine.fleet.metrics import summarize, summarize_compact
from simulations.engine.fleet.plan import Plan, parse_plan
from simulations.engine.fleet.search import search_purchases

__all__ = [
    "Plan",
    "Prepared",
    "compact",
    "parse_plan",
    "prepare",
    "search_purchases",
    "simulate_fleet",
    "simulate_prepared",
    "simulate_replications",
    "summarize",
    "summarize_compact",
]
