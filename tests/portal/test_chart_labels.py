"""Charts that read right (issue #24 item 5, #23 item 6): short run labels from the swept axes, every label
shown, value axes from zero or marked as cut, the tornado on the baseline with the registry's words, and the
run page's step breakdown as a labelled bar with its table. Runs here are plain objects with hand-written
results: these are the chart builders' rules, not the engine's numbers."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from portal import chart_labels, charts
from simulations import metrics

SPEEDS, FABRICS, RATIOS = (200, 400, 800), ("infiniband", "roce"), (1.0, 2.0)
CLUSTER = {"gpu": "H100-SXM", "gpus": 256, "nic_gbps": 400, "fabric": "infiniband", "topology": "rail-optimized",
           "oversubscription": 1.0}


def _result(speed: float, fabric: str, ratio: float, *, sensitivity: list[dict[str, Any]] | None = None,
            fits: bool = True) -> dict[str, Any]:
    """A TCO-shaped result whose figures move with the settings (MFU 0.44-0.47: the range that, drawn from
    44.5%, made one-point differences look dramatic)."""
    mfu = 0.44 + speed / 800 * 0.02 + (0.01 if fabric == "infiniband" else 0.0) - (ratio - 1) * 0.005
    return {
        "performance": {"mfu": mfu, "time_to_train_days": 30.0 / mfu, "fits": fits,
                        "breakdown_s": {"compute": 1.9, "tp_comm": 0.0, "dp_comm_exposed": 0.03, "stragglers": 0.05}},
        "tco": {"run_cost_usd": 9.0e6 + speed * 1e3, "line_items": [
            {"category": "gpu_servers", "annual_usd": 5.0e6}, {"category": "network", "annual_usd": 8.0e5 / ratio},
            {"category": "power", "annual_usd": 4.0e5}]},
        "monte_carlo": {"run_cost_usd": {"p10": 8.5e6, "p50": 9.0e6, "p90": 9.9e6},
                        "time_to_train_days": {"p10": 60.0, "p50": 64.0, "p90": 70.0}},
        "sensitivity": sensitivity or [],
    }


SENSITIVITY = [
    {"input": "costs.prices.HGX-H100", "run_cost_low_usd": 8.6e6, "run_cost_high_usd": 9.6e6},
    {"input": "costs.usd_per_kwh", "run_cost_low_usd": 8.9e6, "run_cost_high_usd": 9.2e6},
    {"input": "costs.goodput.failure_rate_scale", "run_cost_low_usd": 8.95e6, "run_cost_high_usd": 9.1e6},
]


def _run(pk: int, overrides: dict[str, Any], result: dict[str, Any] | None = None,
         cluster: dict[str, Any] | None = None) -> Any:
    base = {**CLUSTER, **(cluster or {})}
    doc_cluster = {**base, **{k.removeprefix("cluster."): v for k, v in overrides.items()}}
    return SimpleNamespace(pk=pk, kind="tco", label=", ".join(f"{k}={v}" for k, v in overrides.items()),
                           input_snapshot={"document": {"cluster": doc_cluster}, "overrides": overrides},
                           result=result)


def _sweep(sensitivity_on: int | None = None) -> list[Any]:
    """A 12-run sweep (link speed x fabric x oversubscription), ids 1-12 in axis order."""
    runs = []
    for pk, (speed, fabric, ratio) in enumerate(itertools.product(SPEEDS, FABRICS, RATIOS), start=1):
        overrides = {"cluster.nic_gbps": speed, "cluster.fabric": fabric, "cluster.oversubscription": ratio}
        runs.append(_run(pk, overrides, _result(speed, fabric, ratio,
                                                sensitivity=SENSITIVITY if pk == sensitivity_on else None)))
    return runs


# --- the label builder -------------------------------------------------------------------------------------
def test_a_sweep_is_labelled_by_its_axes_in_short_words() -> None:
    runs = _sweep()
    baseline = runs[4]  # 400G InfiniBand 1:1
    labels = chart_labels.short_labels(runs, baseline)
    assert labels[1] == "200G IB 1:1" and labels[2] == "200G IB 2:1" and labels[3] == "200G RoCE 1:1"
    assert labels[8] == "400G RoCE 2:1" and labels[12] == "800G RoCE 2:1"
    assert labels[5] == "400G IB 1:1 baseline"
    assert len(set(labels.values())) == 12
    for label in labels.values():
        assert "=" not in label and "nic_gbps" not in label and len(label) <= 20, label
    # the words of each label are its tick's lines
    parts = chart_labels.label_parts(runs, baseline)
    assert parts[8] == ["400G", "RoCE", "2:1"] and parts[5] == ["400G", "IB", "1:1", "baseline"]


def test_only_what_differs_is_named() -> None:
    runs = [_run(1, {"cluster.nic_gbps": 400}), _run(2, {"cluster.nic_gbps": 800})]
    assert chart_labels.short_labels(runs) == {1: "400G", 2: "800G"}
    # the same value written three ways is one value: nothing varies, so the ids name the runs
    same = [_run(5, {"nic_gbps": 400}), _run(6, {"cluster.nic_gbps": 400.0}), _run(7, {"cluster.nic_gbps": "400"})]
    assert chart_labels.short_labels(same, same[2]) == {5: "#5", 6: "#6", 7: "#7 baseline"}


def test_hand_picked_runs_are_told_apart_by_their_cluster() -> None:
    runs = [_run(3, {}, cluster={"gpu": "H100-SXM", "gpus": 1024}), _run(4, {}, cluster={"gpu": "B200", "gpus": 1024}),
            _run(9, {}, cluster={"gpu": "B200", "gpus": 2048, "routing": "adaptive"})]
    assert chart_labels.short_labels(runs) == {3: "H100-SXM 1,024 GPUs default", 4: "B200 1,024 GPUs default",
                                               9: "B200 2,048 GPUs adaptive"}


def test_runs_alike_on_the_axes_get_their_id_and_other_axes_their_words() -> None:
    runs = [_run(10, {"cluster.nic_gbps": 400, "training.global_batch": 1024}),
            _run(11, {"cluster.nic_gbps": 400, "training.global_batch": 2048}),
            _run(12, {"cluster.nic_gbps": 800, "training.global_batch": 2048}),
            _run(13, {"cluster.nic_gbps": 800, "training.global_batch": 2048})]
    labels = chart_labels.short_labels(runs)
    assert labels[10] == "400G batch 1,024" and labels[11] == "400G batch 2,048"
    assert labels[12] == "#12 800G batch 2,048" and labels[13] == "#13 800G batch 2,048"


def test_a_run_that_does_not_fit_says_so() -> None:
    runs = [_run(1, {"cluster.gpus": 64}, {"performance": {"fits": False}}), _run(2, {"cluster.gpus": 512}, {})]
    assert chart_labels.short_labels(runs) == {1: "64 GPUs no fit", 2: "512 GPUs"}


@pytest.mark.parametrize(("key", "value", "words"), [
    ("nic_gbps", 800, "800G"), ("nic_gbps", 200.0, "200G"), ("fabric", "roce", "RoCE"), ("fabric", "infiniband", "IB"),
    ("oversubscription", 2, "2:1"), ("oversubscription", 1.5, "1.5:1"), ("gpus", 16384, "16,384 GPUs"),
    ("routing", "ecmp-qp", "ECMP-QP"), ("topology", "rail-optimized", "rail-opt"), ("gpu", "GB200", "GB200"),
])
def test_axis_words(key: str, value: Any, words: str) -> None:
    assert chart_labels.axis_words(key, value) == words


def test_sensitivity_inputs_have_human_labels() -> None:
    assert metrics.input_label("costs.prices.HGX-H100") == "HGX-H100 unit price"
    assert metrics.input_label("costs.usd_per_kwh") == "Electricity price ($/kWh)"
    assert metrics.input_label("costs.goodput.restart_min") == "Restart after a failure (min)"
    assert metrics.input_label("costs.some_new_thing") == "Some new thing"
    assert "." not in metrics.input_label("training.tokens")


# --- the compare charts ------------------------------------------------------------------------------------
def test_every_run_chart_shows_all_twelve_short_labels() -> None:
    runs = _sweep()
    specs = charts.report_charts(runs, runs[4])
    expected = [chart_labels.short_labels(runs, runs[4])[r.pk] for r in runs]
    for cid in ("chart-tco", "chart-step", "chart-mc-run", "chart-mc-time"):
        spec = specs[cid]
        assert spec["labels"] == expected, cid
        assert len(spec["tick_lines"]) == 12 and spec["all_ticks"] is True, cid
        assert all(" ".join(lines) == label for lines, label in zip(spec["tick_lines"], spec["labels"], strict=True))
    assert "400G RoCE 2:1" in specs["chart-tco"]["labels"]


def test_value_axes_start_at_zero_or_say_they_are_cut() -> None:
    runs = _sweep(sensitivity_on=5)
    specs = charts.report_charts(runs, runs[4])
    assert {"chart-mfu", "chart-ttt", "chart-tco", "chart-step", "chart-mc-run", "chart-tornado"} <= set(specs)
    for cid in ("chart-mfu", "chart-ttt", "chart-mc-run", "chart-mc-time", "chart-tco", "chart-step"):
        assert specs[cid].get("begin_at_zero", True) is True, cid
    for cid, spec in specs.items():
        if spec.get("begin_at_zero") is False:
            assert "zero" in spec["axis_cut"], cid
    assert specs["chart-tornado"]["begin_at_zero"] is False  # bars from the base $ per run: cut, and marked


def test_the_tornado_is_the_baselines_with_registry_labels() -> None:
    runs = _sweep(sensitivity_on=7)  # only run 7 (400G RoCE 1:1) carries a sensitivity analysis
    assert "chart-tornado" not in charts.report_charts(runs, runs[4])  # the baseline has none: no tornado
    specs = charts.report_charts(runs, runs[6])
    tornado = specs["chart-tornado"]
    assert tornado["labels"] == ["HGX-H100 unit price", "Electricity price ($/kWh)", "Failure rate (× catalog)"]
    assert "400G RoCE 1:1 baseline" in tornado["title"]
    assert tornado["datasets"][0]["data"][0] == [9.0e6 + 400e3, 8.6e6]  # from the base $ per run to the low value
    # a run page (one run, no baseline given) draws its own
    assert charts.report_charts([runs[6]])["chart-tornado"]["labels"][0] == "HGX-H100 unit price"


# --- the run page's step breakdown -------------------------------------------------------------------------
def test_step_breakdown_is_a_labelled_horizontal_bar_with_a_table() -> None:
    run = _run(1, {}, _result(400, "infiniband", 1.0))
    bd = charts.step_breakdown(run)
    assert bd is not None
    assert [r["label"] for r in bd["rows"]] == ["Compute", "DP comm (exposed)", "Stragglers"]
    assert bd["total_s"] == pytest.approx(1.98)
    assert bd["rows"][0]["share"] == pytest.approx(1.9 / 1.98)
    assert sum(r["share"] for r in bd["rows"]) == pytest.approx(1.0)
    assert bd["zero_terms"] == ["TP comm"]
    spec = bd["spec"]
    assert spec["horizontal"] is True and spec["stacked"] is True and spec["segment_labels"] is True
    assert [d["label"] for d in spec["datasets"]] == ["Compute", "DP comm (exposed)", "Stragglers"]
    assert [d["data"] for d in spec["datasets"]] == [[1.9], [0.03], [0.05]]
    # the table's colour keys are the bar's parts' colours
    assert [r["color"] for r in bd["rows"]] == [charts.SEGMENT_COLORS[d["color_index"]] for d in spec["datasets"]]


def test_no_step_breakdown_for_a_configuration_that_does_not_fit() -> None:
    assert charts.step_breakdown(_run(1, {}, _result(400, "roce", 1.0, fits=False))) is None
    assert charts.step_breakdown(_run(1, {}, {"performance": {"breakdown_s": {"compute": 0.0}}})) is None
