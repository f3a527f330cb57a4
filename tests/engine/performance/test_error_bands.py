"""Every figure with its error band (issue #22 item 4): the lookup of the validation's band table, and the
intervals predict and tco attach to their headline figures."""

from __future__ import annotations

import json

import pytest

from engine.cost.tco import tco
from engine.performance.api import predict
from engine.performance.error_bands import ERROR_BANDS_PATH, figure_intervals, throughput_band

TABLE = {
    "dimensions": [{"name": "comm", "field": "network_wait_fraction", "edges": [0.05, 0.1],
                    "labels": ["<0.05", "0.05-0.10", ">=0.10"]},
                   {"name": "scale", "field": "gpus", "edges": [65, 1025], "labels": ["<=64", "65-1024", ">1024"]},
                   {"name": "framework", "field": "framework"}],
    "levels": [["comm", "scale", "framework"], ["comm", "scale"], ["comm"], []],
    "bands": [{"cell": {"comm": "<0.05", "scale": "<=64", "framework": "nemo"}, "p10": 0.9, "p90": 1.05},
              {"cell": {"comm": ">=0.10", "scale": ">1024"}, "p10": 0.7, "p90": 1.0},
              {"cell": {"comm": "0.05-0.10"}, "p10": 0.85, "p90": 1.1},
              {"cell": {}, "p10": 0.8, "p90": 1.2}],
}
LLAMA_8B = {"name": "Llama-3-8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
            "vocab": 128256, "seq_len": 8192}


@pytest.mark.parametrize(("regime", "band"), [
    ({"network_wait_fraction": 0.01, "gpus": 64, "framework": "nemo"}, (0.9, 1.05)),  # finest cell
    ({"network_wait_fraction": 0.01, "gpus": 64, "framework": "deepspeed"}, (0.8, 1.2)),  # no cell: pooled
    ({"network_wait_fraction": 0.2, "gpus": 4096, "framework": "auto"}, (0.7, 1.0)),  # (comm, scale)
    ({"network_wait_fraction": 0.1, "gpus": 4096, "framework": "auto"}, (0.7, 1.0)),  # 0.10 is in ">=0.10"
    ({"network_wait_fraction": 0.07, "gpus": 8, "framework": "auto"}, (0.85, 1.1)),  # (comm) only
    ({"network_wait_fraction": 0.2, "gpus": 1024, "framework": "auto"}, (0.8, 1.2)),  # 1024 is "65-1024"
])
def test_the_finest_cell_with_a_band_wins(regime: dict, band: tuple[float, float]) -> None:
    assert throughput_band(regime, TABLE) == band


def test_throughput_scales_by_the_band_and_durations_by_its_inverse() -> None:
    out = figure_intervals({"mfu": 0.4, "step_time_s": 2.0, "run_cost_usd": 1000.0, "memory_gb_per_gpu": 70.0,
                            "gpu_hours": None}, (0.8, 1.25))
    assert out["mfu"] == pytest.approx([0.32, 0.5])
    assert out["step_time_s"] == pytest.approx([1.6, 2.5])  # 2.0 / 1.25, 2.0 / 0.8
    assert out["run_cost_usd"] == pytest.approx([800.0, 1250.0])
    assert "memory_gb_per_gpu" not in out and "gpu_hours" not in out


def _shipped_band(regime: dict) -> tuple[float, float]:
    """The shipped table's rule, written out again from the JSON (its "about" states it)."""
    table = json.loads(ERROR_BANDS_PATH.read_text())
    def label(dim: dict) -> str:
        v = regime[dim["field"]]
        if "edges" not in dim:
            return str(v)
        return dim["labels"][sum(1 for e in dim["edges"] if e <= v)]
    dims = {d["name"]: d for d in table["dimensions"]}
    for level in table["levels"]:
        want = {n: label(dims[n]) for n in level}
        for entry in table["bands"]:
            if entry["cell"] == want:
                return entry["p10"], entry["p90"]
    raise AssertionError("no pooled band")


def test_predict_and_tco_carry_the_band_of_their_regime() -> None:
    doc = {"model": LLAMA_8B, "training": {"global_batch": 512, "tokens": 1e12}, "parallelism": "auto",
           "cluster": {"gpu": "H100-SXM", "gpus": 256}}
    r = predict(doc)
    lo, hi = _shipped_band({"network_wait_fraction": r.network_wait_fraction, "gpus": 256, "framework": "auto"})
    assert r.intervals is not None
    assert r.intervals["mfu"] == pytest.approx([r.mfu * lo, r.mfu * hi])
    assert r.intervals["step_time_s"] == pytest.approx([r.step_time_s / hi, r.step_time_s / lo])
    assert r.intervals["mfu"][0] < r.mfu < r.intervals["mfu"][1]
    assert r.to_dict()["intervals"]["tokens_per_s"] == pytest.approx([r.tokens_per_s * lo, r.tokens_per_s * hi])
    out = tco(doc)
    cost = out["tco"]["run_cost_usd"]
    assert out["intervals"]["run_cost_usd"] == pytest.approx([cost / hi, cost / lo])
    assert out["intervals"]["mfu"] == pytest.approx(r.intervals["mfu"])
