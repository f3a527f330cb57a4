"""Purchase search: cheapest option meeting every deadline at the confidence, and why the others lose."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.errors import ScenarioError
from engine.fleet.core import simulate_fleet
from engine.fleet.costs import cluster_cost
from engine.fleet.plan import parse_plan
from engine.fleet.search import search_purchases
from tests.engine.fleet._plans import job

H100 = {"name": "h100", "gpu": "H100-SXM", "gpus": 64}


def doc(**extra: Any) -> dict[str, Any]:
    # two 64-GPU jobs, both due on day 12, on one 64-GPU cluster: one of them misses unless we buy
    return {
        "horizon_days": 60, "failures": False, "replications": 2, "confidence": 0.9,
        "clusters": [H100],
        "jobs": [job("first", 64, 10, 0, deadline_day=12), job("second", 64, 10, 0, deadline_day=12)],
        "candidates": [
            {"name": "H100 now", "gpu": "H100-SXM", "gpus": [64, 128], "in_service_day": 0},
            {"name": "H100 late", "gpu": "H100-SXM", "gpus": 64, "in_service_day": 5},
        ],
        **extra,
    }


def test_cheapest_option_that_meets_the_deadlines_wins_and_the_others_say_why() -> None:
    out = search_purchases(doc())
    rec = out["recommendation"]
    assert rec["option"] == "H100 now 64 GPUs day 0"
    assert rec["share_meeting_all_deadlines"] == 1.0 and rec["capex_usd"] > 0
    why = {a["option"]: a["why_it_loses"] for a in out["alternatives"]}
    assert why["buy nothing"].startswith("misses 1 deadline(s) at P90")
    assert "second" in why["buy nothing"] or "first" in why["buy nothing"]
    assert why["H100 late"].startswith("misses 1 deadline(s)")
    assert why["H100 now 128 GPUs day 0"].startswith("meets the deadlines but costs $")
    # the price is the TCO model's: capex of a 64-GPU H100 cluster, opex for the days in service
    p = parse_plan(doc())
    cost = cluster_cost(p.candidates[0], None, "candidates[0]")
    assert rec["capex_usd"] == pytest.approx(cost["capex_usd"])
    assert rec["cost_usd"] == pytest.approx(cost["capex_usd"] + cost["annual_opex_usd"] * 60 / 365)


def test_budget_refuses_options_and_no_option_gives_a_note() -> None:
    p = parse_plan(doc())
    small = cluster_cost(p.candidates[0], None, "candidates[0]")["capex_usd"]
    out = search_purchases(doc(budget_usd=small * 0.5))
    assert out["recommendation"] is None
    assert out["note"].startswith("no option meets every deadline at P90")
    why = {a["option"]: a["why_it_loses"] for a in out["alternatives"]}
    assert why["H100 now 64 GPUs day 0"].startswith("capex $")


def test_search_needs_candidates_and_costs() -> None:
    d = doc()
    del d["candidates"]
    with pytest.raises(ScenarioError, match=r"^candidates: is required"):
        search_purchases(d)
    with pytest.raises(ScenarioError, match=r"^costs: a purchase search prices"):
        search_purchases(doc(costs=False))


def test_costs_per_delivered_gpu_hour_and_quarters() -> None:
    d = copy.deepcopy(doc())
    del d["candidates"]
    r = simulate_fleet(d)
    c = r["costs"]
    per = c["clusters"]["h100"]
    assert c["horizon_cost_usd"] == pytest.approx(per["annual_tco_usd"] * 60 / 365)
    assert c["usd_per_delivered_gpu_hour"] == pytest.approx(c["horizon_cost_usd"] / (64 * 20 * 24))
    assert sum(q["gpu_hours_delivered"] for q in r["quarters"]) == pytest.approx(64 * 20 * 24)
    assert r["quarters"][0]["capex_usd"] == 0  # an existing cluster's capex is sunk
