"""A layout that does not fit has no figures (issue #22 item 6): None in the Result itself, everywhere."""

from __future__ import annotations

import dataclasses

import pytest

from engine.cost.tco import tco
from engine.errors import ScenarioError
from engine.performance.api import predict, search
from engine.performance.calibrated import scale_result
from engine.performance.result import NULL_WHEN_UNFIT

LLAMA_405B = {"name": "Llama-3-405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
              "ffn_hidden": 53248, "vocab": 128256, "seq_len": 8192}


def _unfit() -> dict:
    # 405B parameters x 16 bytes of mixed-precision Adam state = 6.5 TB; over 64 GPUs that is 101 GB per GPU
    # before activations, more than an H100's 80 GB even fully sharded: no layout can fit
    return {"model": LLAMA_405B, "training": {"global_batch": 64, "tokens": 1e9}, "parallelism": "auto",
            "cluster": {"gpu": "H100-SXM", "gpus": 64}}


def test_the_premise_no_layout_fits_by_the_state_bytes_alone() -> None:
    params = 405e9
    assert params * 16 / 64 / 1e9 > 80


def test_an_unfit_result_has_no_figures_in_the_result_itself() -> None:
    r = predict(_unfit())
    assert r.fits is False
    for key in NULL_WHEN_UNFIT:
        assert getattr(r, key) is None, key
        assert r.to_dict()[key] is None, key
    assert r.breakdown_s is None and r.to_dict()["breakdown_s"] is None
    assert r.unconstrained is not None and r.unconstrained["step_time_s"] > 0  # diagnostics only
    assert "unconstrained" not in r.to_dict()


def test_an_unfit_prediction_reports_the_leanest_layout_and_what_it_needs() -> None:
    r = predict(_unfit())
    s = search(_unfit(), top_k=20)
    leanest = min([s.memory_gb_per_gpu] + [a.result.memory_gb_per_gpu for a in s.alternatives])
    assert r.memory_gb_per_gpu == pytest.approx(leanest)
    assert s.memory_gb_per_gpu == pytest.approx(leanest)
    assert any(f"the leanest needs {r.memory_gb_per_gpu:.1f} GB per GPU" in n for n in r.notes)
    assert all("does not fit" in a.why for a in s.alternatives)


def test_nothing_prices_or_scales_an_unfit_layout() -> None:
    with pytest.raises(ScenarioError, match="does not fit in memory"):
        tco(_unfit())
    r = predict(_unfit())
    assert scale_result(r, 1.5) is r  # a calibration factor has nothing to scale
    assert dataclasses.replace(r).step_time_s is None  # copies stay empty


def test_a_layout_that_fits_keeps_every_figure() -> None:
    doc = _unfit()
    doc["cluster"]["gpus"] = 1024
    doc["training"]["global_batch"] = 1024
    r = predict(doc)
    assert r.fits and r.unconstrained is None
    assert all(getattr(r, key) is not None for key in NULL_WHEN_UNFIT) and r.breakdown_s


def test_a_dead_end_carries_its_machine_code() -> None:
    """16 GPUs, 5 heads (TP 1 or 5, and 5 does not divide 16), 2 layers (PP <= 2), a global batch of 3 (DP 1 or
    3) and a 1,001-token sequence (no context-parallel split): no product of degrees reaches 16."""
    doc = {"model": {"name": "x", "layers": 2, "hidden": 640, "heads": 5, "kv_heads": 5, "ffn_hidden": 2560,
                     "vocab": 32000, "seq_len": 1001},
           "training": {"global_batch": 3, "tokens": 1e9}, "parallelism": "auto",
           "cluster": {"gpu": "H100-SXM", "gpus": 16}}
    with pytest.raises(ScenarioError) as err:
        predict(doc)
    assert err.value.field == "parallelism" and err.value.code == "no_layout"
