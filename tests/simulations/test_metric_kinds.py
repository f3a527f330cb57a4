"""The metric registry's kinds (issue #24): how a figure is rounded in exports and how it moves in a comparison."""

from __future__ import annotations

import pytest

from simulations import metrics


def test_every_registry_metric_has_a_kind_from_its_unit() -> None:
    kinds = {m.path: metrics.kind(m.path) for m in metrics.METRICS}
    assert kinds["tco.capex_usd"] == kinds["tco.annual_tco_usd"] == kinds["tco.run_cost_usd"] == metrics.MONEY
    assert kinds["tco.usd_per_gpu_hour"] == kinds["tco.usd_per_million_tokens"] == metrics.PRICE
    assert kinds["performance.mfu"] == kinds["performance.network_wait_fraction"] == metrics.SHARE
    assert kinds["summary.utilization.p50"] == metrics.SHARE
    assert kinds["performance.step_time_s"] == kinds["summary.first_shortfall_day.p50"] == metrics.AMOUNT
    assert set(kinds.values()) <= set(metrics.KINDS)


def test_one_definition_of_a_change() -> None:
    """Points for shares (MFU 40% -> 42% is +2.0 pt), percent of the baseline for everything else."""
    assert metrics.change("performance.mfu", 0.40, 0.42) == pytest.approx(2.0)
    assert metrics.change("mfu", 0.40, 0.42) == pytest.approx(2.0)  # a predict run's short path too
    assert metrics.change("performance.network_wait_fraction", 0.05, 0.068) == pytest.approx(1.8)
    assert metrics.change_unit("performance.mfu") == "pt" and metrics.change_unit("tco.capex_usd") == "%"
    assert metrics.change("tco.capex_usd", 100.0, 104.2) == pytest.approx(4.2)
    assert metrics.change("performance.step_time_s", 2.0, 1.0) == pytest.approx(-50.0)
    assert metrics.change("tco.capex_usd", 0.0, 5.0) is None and metrics.change("tco.capex_usd", None, 5.0) is None
    # a share the registry does not name is still a share, by its name
    assert metrics.change_unit("tco.network_incl_nics_share_of_tco") == "pt"


@pytest.mark.parametrize(("path", "label", "unit", "kind"), [
    ("fabric.switches.leaf", "Fabric · Switches · leaf", "count", metrics.AMOUNT),
    ("tco.annual_by_category_usd.power", "Annual by category · power", "USD/yr", metrics.MONEY),
    ("tco.nic_capex_usd", "NIC capex", "USD", metrics.MONEY),
    ("tco.capex_per_gpu_usd", "Capex per GPU", "USD/GPU", metrics.PRICE),
    ("tco.network_share_of_hardware_and_energy", "Network share of hardware and energy", "fraction", metrics.SHARE),
    ("goodput.mean_time_to_interrupt_h", "Goodput · Mean time to interrupt", "h", metrics.AMOUNT),
    ("performance.breakdown_s.compute", "Breakdown · compute", "s", metrics.AMOUNT),
    ("monte_carlo.annual_tco_usd.p90", "Annual TCO (Monte Carlo P90)", "USD/yr", metrics.MONEY),
    ("monte_carlo.network_share_of_tco.p10", "Network share of TCO (Monte Carlo P10)", "fraction", metrics.SHARE),
    ("summary.utilization.p10", "Utilization (allocated) (P10)", "fraction", metrics.SHARE),
    ("fabric.network_power_kw", "Fabric · Network power", "kW", metrics.AMOUNT),
])
def test_a_figure_the_registry_does_not_name_still_gets_a_human_label_and_a_unit(path: str, label: str, unit: str,
                                                                                  kind: str) -> None:
    spec = metrics.describe(path)
    assert (spec.label, spec.unit, metrics.kind(path)) == (label, unit, kind)


def test_named_metrics_keep_their_registry_words() -> None:
    assert metrics.describe("performance.mfu").label == "MFU" and metrics.describe("mfu").unit == "fraction"
    assert metrics.describe("tco.capex_usd") is metrics.get("tco.capex_usd")
