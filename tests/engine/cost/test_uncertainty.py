"""Ranges, Monte Carlo percentiles, vectorised work and tornado sensitivity."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.cost.tco import tco
from engine.cost.uncertainty import monte_carlo, sample_range
from engine.document.ranges import find_ranges, likely_scenario
from engine.errors import ScenarioError
from engine.schema.types import Range
from tests.engine.cost.test_tco import reference


def ranged(**costs: Any) -> dict[str, Any]:
    doc = reference()
    doc["costs"].update(costs)
    return doc


def test_find_and_resolve_ranges() -> None:
    doc = ranged(usd_per_kwh={"low": 0.05, "likely": 0.08, "high": 0.19}, prices={"QM9700": {"low": 36000, "high": 50000}})
    doc["cluster"]["nic_gbps"] = {"low": 200, "likely": 400, "high": 400}
    r = find_ranges(doc)
    assert set(r) == {"costs.usd_per_kwh", "costs.prices.QM9700", "cluster.nic_gbps"}
    assert r["costs.prices.QM9700"].likely == 43000  # midpoint default
    assert r["cluster.nic_gbps"].integer and r["cluster.nic_gbps"].affects_performance
    base = likely_scenario(doc)
    assert base["costs"]["usd_per_kwh"] == 0.08 and base["cluster"]["nic_gbps"] == 400
    assert isinstance(doc["cluster"]["nic_gbps"], dict)  # input untouched


@pytest.mark.parametrize(("value", "field"), [
    ({"low": 0.2, "likely": 0.1, "high": 0.1}, "costs.usd_per_kwh"),
    ({"low": 0.1, "likely": 0.3, "high": 0.2}, "costs.usd_per_kwh"),
    ({"low": -0.1, "likely": 0.1, "high": 0.2}, "costs.usd_per_kwh"),
    ({"low": 0.1, "likely": 0.1, "high": 0.2, "dist": "normal"}, "costs.usd_per_kwh.dist"),
    ({"low": "a", "high": 0.2}, "costs.usd_per_kwh.low"),
])
def test_bad_ranges(value: dict[str, Any], field: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        tco(ranged(usd_per_kwh=value), monte_carlo=10)
    assert exc.value.field == field


def test_negative_price_range_rejected() -> None:
    with pytest.raises(ScenarioError) as exc:
        tco(ranged(prices={"QM9700": {"low": -5, "likely": 1, "high": 2}}))
    assert exc.value.field == "costs.prices.QM9700"


def test_unknown_catalog_key_in_prices() -> None:
    with pytest.raises(ValueError, match=r"costs\.prices\.NOPE"):
        tco(ranged(prices={"NOPE": {"low": 1, "high": 2}}), monte_carlo=10)


def test_sampling_distributions() -> None:
    rng = np.random.default_rng(1)
    tri = sample_range(Range(("costs", "x"), 1.0, 2.0, 6.0, "triangular", False), 200_000, rng)
    assert tri.min() >= 1.0 and tri.max() <= 6.0
    assert tri.mean() == pytest.approx((1 + 2 + 6) / 3, rel=0.01)
    pert = sample_range(Range(("costs", "x"), 1.0, 2.0, 6.0, "pert", False), 200_000, rng)
    assert pert.mean() == pytest.approx((1 + 4 * 2 + 6) / 6, rel=0.01)


def test_monte_carlo_percentiles_and_reproducibility() -> None:
    doc = ranged(usd_per_kwh={"low": 0.05, "likely": 0.08, "high": 0.19},
                 colocation_usd_per_kw_month={"low": 140, "likely": 184, "high": 250},
                 goodput={"restart_min": {"low": 5, "likely": 10, "high": 40}})
    a = tco(doc, monte_carlo=2000, seed=7)
    b = tco(doc, monte_carlo=2000, seed=7)
    mc = a["monte_carlo"]
    assert mc == b["monte_carlo"]
    assert mc["samples"] == 2000 and mc["performance_points"] == 1
    for key in ("time_to_train_days", "annual_tco_usd", "run_cost_usd"):
        p = mc[key]
        assert p["p10"] < p["p50"] < p["p90"]
    det = a["tco"]
    assert mc["annual_tco_usd"]["p10"] < det["annual_tco_usd"] < mc["annual_tco_usd"]["p90"]
    # restart time only moves time-to-train (wall clock through goodput), not the annual TCO of the cluster
    assert mc["time_to_train_days"]["p90"] > a["tco"]["run_days"]


def test_no_ranges_draws_the_catalog_default_ranges_the_tornado_uses() -> None:
    """A scenario without ranges still has uncertain prices and facility figures: the Monte Carlo band draws the
    same catalog default ranges the tornado swings, and says so; the deterministic figure lies inside the band."""
    out = tco(reference(), monte_carlo=2000, sensitivity=True)
    mc = out["monte_carlo"]
    p = mc["run_cost_usd"]
    assert p["p10"] < p["p50"] < p["p90"]
    assert p["p10"] < out["tco"]["run_cost_usd"] < p["p90"]
    assert mc["inputs"] and set(mc["sources"].values()) == {"catalog default range"}
    assert set(mc["inputs"]) == {row["input"] for row in out["sensitivity"]}


def test_without_defaults_no_ranges_gives_a_point() -> None:
    out = monte_carlo(reference(), samples=100, include_defaults=False)
    p = out["run_cost_usd"]
    assert p["p10"] == pytest.approx(p["p90"])
    assert out["inputs"] == [] and out["sources"] == {}


def test_performance_ranges_run_predict_on_a_few_points() -> None:
    doc = ranged(usd_per_kwh={"low": 0.05, "likely": 0.08, "high": 0.19})
    doc["cluster"]["nic_gbps"] = {"low": 100, "likely": 300, "high": 400}
    out = tco(doc, monte_carlo=5000, seed=3)
    mc = out["monte_carlo"]
    assert 2 <= mc["performance_points"] <= 125
    p = mc["time_to_train_days"]
    assert p["p10"] <= p["p50"] <= p["p90"]
    assert p["p90"] > p["p10"]  # slower NICs -> longer runs


def test_ten_thousand_cost_samples_are_one_vectorised_costing(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 draws of cost-only ranges cost one performance point and one costing call over arrays of 10,000,
    not 10,000 calls (the time it takes is a figure of ``make bench``: benchmarks/bench_tco.py)."""
    from engine.cost import uncertainty

    doc = ranged(usd_per_kwh={"low": 0.05, "likely": 0.08, "high": 0.19},
                 pue={"low": 1.1, "likely": 1.3, "high": 1.56},
                 prices={"HGX-H100": {"low": 250000, "likely": 295600, "high": 320000},
                         "QM9700": {"low": 36000, "likely": 42000, "high": 50000}},
                 goodput={"failure_rate_scale": {"low": 0.5, "likely": 1, "high": 2}})
    sizes: list[int] = []
    real_cost_lines = uncertainty.cost_lines

    def counted(point: Any, params: Any, catalog: Any) -> Any:
        lines, summary, gp = real_cost_lines(point, params, catalog)
        sizes.append(int(np.size(summary["run_cost_usd"])))
        return lines, summary, gp

    monkeypatch.setattr(uncertainty, "cost_lines", counted)
    out = tco(doc, monte_carlo=10_000)
    mc = out["monte_carlo"]
    assert mc["samples"] == 10_000 and mc["performance_points"] == 1
    assert sizes == [10_000], "one costing call over all the samples"
    p = mc["run_cost_usd"]
    assert p["p10"] < p["p50"] < p["p90"]


def test_sensitivity_tornado_order() -> None:
    doc = ranged(usd_per_kwh={"low": 0.02, "likely": 0.08, "high": 0.60})
    rows = tco(doc, sensitivity=True)["sensitivity"]
    swings = [r["swing_usd"] for r in rows]
    assert swings == sorted(swings, reverse=True)
    assert rows[0]["input"] == "costs.usd_per_kwh"
    top = rows[0]
    assert top["swing_usd"] == pytest.approx(abs(top["run_cost_high_usd"] - top["run_cost_low_usd"]))
    assert top["run_cost_high_usd"] > top["run_cost_low_usd"]
    assert {"input", "low_value", "high_value", "run_cost_low_usd", "run_cost_high_usd", "swing_usd"} <= set(top)
    names = {r["input"] for r in rows}
    assert "costs.prices.HGX-H100" in names  # catalog default range for the server price
    assert "costs.pue" not in names  # pinned by the scenario


def test_sensitivity_with_performance_input() -> None:
    doc = reference()
    doc["cluster"]["nic_gbps"] = {"low": 100, "likely": 400, "high": 400}
    rows = tco(doc, sensitivity=True)["sensitivity"]
    nic = next(r for r in rows if r["input"] == "cluster.nic_gbps")
    assert nic["run_cost_low_usd"] > nic["run_cost_high_usd"]


def test_nic_rate_range_prices_the_nic_each_point_needs() -> None:
    """{200, 400, 800} Gb/s: every point runs at a real line rate on hardware that can carry it (an 800G point
    gets 800G NICs and switches instead of failing on the likely 400G NIC)."""
    from engine.cost.uncertainty import line_rates

    assert {100.0, 200.0, 400.0, 800.0} <= set(line_rates())
    doc = reference()
    doc["cluster"]["nic_gbps"] = {"low": 200, "likely": 400, "high": 800}
    out = tco(doc, monte_carlo=2000, seed=1, sensitivity=True)
    assert out["monte_carlo"]["performance_points"] == 3  # 200, 400 and 800: no in-between rates
    nic = next(r for r in out["sensitivity"] if r["input"] == "cluster.nic_gbps")
    assert (nic["low_value"], nic["high_value"]) == (200, 800)
    assert nic["run_cost_high_usd"] != nic["run_cost_low_usd"]
