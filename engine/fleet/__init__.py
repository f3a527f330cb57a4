"""Fleet capacity planning: a discrete-event simulation of clusters, jobs, failures and schedulers over months.

Pure Python + numpy (no Django). Entry point (a contract): ``simulate_fleet(plan: dict, seed: int = 0) -> dict``.
``simulate_replications`` gives P10/P50/P90 over seeds; ``search_purchases`` finds the cheapest purchase that
meets the deadlines. The model, its assumptions and the plan document: docs/fleet-model.md.
"""
