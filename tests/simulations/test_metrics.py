"""The metric registry is the one vocabulary: TCO sweeps record performance figures, lookups find both shapes."""

from __future__ import annotations

from typing import Any


def test_value_finds_a_figure_in_tco_and_predict_results() -> None:
    from simulations import metrics

    tco_result = {"performance": {"step_time_s": 2.5, "mfu": 0.41}, "tco": {"capex_usd": 1e6}}
    predict_result = {"step_time_s": 3.0, "mfu": 0.38}
    assert metrics.value(tco_result, "performance.step_time_s") == 2.5
    assert metrics.value(tco_result, "step_time_s") == 2.5  # the short key reaches the TCO path too
    assert metrics.value(predict_result, "performance.mfu") == 0.38
    assert metrics.value(tco_result, "tco.capex_usd") == 1e6
    assert metrics.value(tco_result, "tco.run_cost_usd") is None
    assert metrics.values(tco_result, metrics.SWEEP) == {"step_time_s": 2.5, "mfu": 0.41, "tco.capex_usd": 1e6}


def test_registry_entries_are_complete_and_unique() -> None:
    from simulations import metrics

    paths = [p for m in metrics.METRICS for p in m.paths]
    assert len(paths) == len(set(paths)), "a path names one metric"
    for m in metrics.METRICS:
        assert m.label and m.unit and m.format in {"s", "pct", "num", "days", "usd", "usd2", "usd4", "gb"}, m
    assert {m.key for m in metrics.BEST} >= {"step_time_s", "mfu", "time_to_train_days", "tco.usd_per_million_tokens"}
    assert metrics.get("performance.mfu").lower_is_better is False
    assert metrics.ordered(["zzz", "tco.capex_usd", "performance.step_time_s"])[0] == "performance.step_time_s"


def test_tco_sweep_records_best_step_time_mfu_and_time_to_train(world: Any, fake_engine: Any) -> None:
    """KEY_METRICS used flat paths, so a TCO sweep (the default kind) never recorded its performance figures."""
    from simulations import services

    scenario = world["x"]["scenario"]
    sweep = services.sweep_submit(scenario=scenario, axes={"cluster.nic_gbps": [200, 400, 800]},
                                  user=world["users"]["planner"], kind="tco")
    for run in sweep.runs.order_by("pk"):
        services.run_execute(run_id=run.pk)
    summary = services.sweep_refresh(sweep_id=sweep.pk).summary
    rows = summary["runs"]
    assert len(rows) == 3 and all({"step_time_s", "mfu", "time_to_train_days"} <= set(r["metrics"]) for r in rows)
    best = summary["best"]
    fastest = min(rows, key=lambda r: r["metrics"]["step_time_s"])
    assert best["step_time_s"]["run"] == fastest["run"]
    assert best["step_time_s"]["overrides"] == {"cluster.nic_gbps": 800}  # the fake engine: faster NIC, faster step
    assert best["mfu"]["overrides"] == {"cluster.nic_gbps": 800}  # higher is better for MFU
    assert best["time_to_train_days"]["value"] == fastest["metrics"]["time_to_train_days"]
    assert best["tco.usd_per_million_tokens"]["overrides"] == {"cluster.nic_gbps": 800}


def test_every_step_time_breakdown_key_of_the_engine_has_one_label() -> None:
    """One label registry for the step-time breakdown: the portal used to show the raw key ``stragglers``."""
    from engine.performance.model import BREAKDOWN_KEYS
    from simulations import metrics

    labelled = [key for key, _ in metrics.BREAKDOWN]
    assert set(BREAKDOWN_KEYS) <= set(labelled), set(BREAKDOWN_KEYS) - set(labelled)
    assert len(labelled) == len(set(labelled))
    for key in BREAKDOWN_KEYS:
        assert metrics.breakdown_label(key) != key, key
    assert metrics.breakdown_label("stragglers") == "Stragglers"


def test_the_portal_step_bars_use_the_registry_labels() -> None:
    from engine.performance.model import BREAKDOWN_KEYS
    from portal import charts
    from simulations import metrics

    est = charts.estimate({"breakdown_s": dict.fromkeys(BREAKDOWN_KEYS, 1.0)})
    assert [s["label"] for s in est["segments"]] == [metrics.breakdown_label(k) for k in BREAKDOWN_KEYS]
