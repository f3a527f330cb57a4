"""Goodput: Llama 3 405B interruption statistics from per-component rates; Young/Daly checkpointing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.catalog import default_catalog
from engine.cost.goodput import (
    GoodputInputs,
    daly_interval_s,
    effective_fraction,
    goodput,
    goodput_arrays,
    load_reliability,
    param_count,
)
from engine.cost.tco import tco
from engine.fabric.sizing import size_fabric
from engine.fabric.tree import FabricSpec
from tests.engine.cost.test_tco import LLAMA3_405B, reference

DAYS = 54
GPUS = 16384
UNEXPECTED = 419  # Llama 3 paper Table 5


def inputs(gpus: int = GPUS, **fabric: object) -> GoodputInputs:
    plan = size_fabric(FabricSpec(gpus=gpus, **fabric))  # type: ignore[arg-type]
    return GoodputInputs(gpus, gpus // 8, plan.nics, plan.switches["total"], plan.transceiver_count,
                         plan.cable_count, param_count(LLAMA3_405B))


def test_param_count_405b() -> None:
    assert param_count(LLAMA3_405B) / 1e9 == pytest.approx(405, rel=0.01)


def test_rates_are_per_component_not_a_job_constant() -> None:
    model = load_reliability()
    assert set(model.rates) >= {"gpu", "hbm", "host", "nic", "switch", "transceiver", "cable"}
    assert model.per["gpu"] == "gpu" and model.per["host"] == "node" and model.per["switch"] == "switch"


def test_llama3_405b_interruptions_within_25pct() -> None:
    g = goodput(inputs())
    assert g["interruptions_per_day"] == pytest.approx(UNEXPECTED / DAYS, rel=0.25)  # ~7.8/day
    assert g["interruptions_per_day"] * DAYS == pytest.approx(UNEXPECTED, rel=0.25)
    assert g["mean_time_to_interrupt_h"] == pytest.approx(24 * DAYS / UNEXPECTED, rel=0.25)  # ~3.1 h
    by = g["interruptions_by_component_per_day"]
    per_gpu_day = sum(by.values()) / GPUS
    assert per_gpu_day == pytest.approx(4.7e-4, rel=0.25)
    assert (by["gpu"] + by["hbm"]) / GPUS == pytest.approx(3.0e-4, rel=0.25)
    assert (by["switch"] + by["transceiver"] + by["cable"]) / GPUS == pytest.approx(4.0e-5, rel=0.25)
    assert by["nic"] / GPUS == pytest.approx(8e-6, rel=0.25)
    assert g["effective_training_fraction"] > 0.90  # Llama 3: effective training time above 90%


def test_llama3_through_tco() -> None:
    g = tco(reference())["goodput"]
    assert g["interruptions_per_day"] == pytest.approx(UNEXPECTED / DAYS, rel=0.25)
    assert g["mean_time_to_interrupt_h"] == pytest.approx(3.1, rel=0.25)
    assert 0.9 < g["effective_training_fraction"] < 1.0


def test_rate_scales_with_parts() -> None:
    full = goodput(inputs())
    half = goodput(inputs(GPUS // 2))
    assert half["interruptions_per_day"] == pytest.approx(full["interruptions_per_day"] / 2, rel=0.05)
    # fewer switches and optics: a multi-plane 2-tier fabric fails less often than a 3-tier one
    mp = goodput(inputs(topology="multi-plane", tiers=2))
    assert mp["interruptions_by_component_per_day"]["switch"] < full["interruptions_by_component_per_day"]["switch"]


def test_catalog_rates_drive_result() -> None:
    cat = default_catalog()
    cat["REL-GPU"]["specs"]["rate_per_unit_day"] *= 2
    base = goodput(inputs())
    more = goodput(inputs(), catalog=cat)
    gpu = base["interruptions_by_component_per_day"]["gpu"]
    assert more["interruptions_per_day"] == pytest.approx(base["interruptions_per_day"] + gpu)


def test_checkpoint_write_time() -> None:
    g = goodput(inputs())
    bytes_ = param_count(LLAMA3_405B) * 14.0
    assert g["checkpoint_write_s"] == pytest.approx(bytes_ / 2000e9)
    slow = goodput(inputs(), overrides={"storage_write_gbytes_per_s": 200.0})
    assert slow["checkpoint_write_s"] == pytest.approx(10 * g["checkpoint_write_s"])
    assert slow["checkpoint_interval_min"] > g["checkpoint_interval_min"]
    assert slow["effective_training_fraction"] < g["effective_training_fraction"]


def test_young_daly_interval_is_optimal() -> None:
    d, m = 60.0, 3 * 3600.0
    tau = float(daly_interval_s(d, m))
    assert tau == pytest.approx(math.sqrt(2 * d * m), rel=0.05)
    f_opt = float(effective_fraction(tau, d, 600.0, m))
    for factor in (0.5, 0.8, 1.25, 2.0):
        assert float(effective_fraction(tau * factor, d, 600.0, m)) < f_opt


def test_vectorized_goodput() -> None:
    rates = np.array([4.0, 8.0, 16.0])
    g = goodput_arrays(rates, 5e12, 2000.0, np.array([5.0, 10.0, 20.0]))
    frac = np.asarray(g["effective_training_fraction"])
    assert frac.shape == (3,)
    assert np.all(np.diff(frac) < 0)
    assert np.asarray(g["mean_time_to_interrupt_h"]) == pytest.approx(24 / rates)


def test_failure_rate_scale_and_fixed_interval() -> None:
    g = goodput(inputs(), overrides={"failure_rate_scale": 2.0, "checkpoint_interval_min": 30.0})
    base = goodput(inputs())
    assert g["mean_time_to_interrupt_h"] == pytest.approx(base["mean_time_to_interrupt_h"] / 2)
    assert g["checkpoint_interval_min"] == 30.0


# DeepSeek-V3's released checkpoint: 685B = 671B main model + 14B MTP module (the model card), whose 14B include its
# own copies of the embedding and output head (2 x 129,280 x 7,168), which the module shares with the main model
V3_WITH_MTP_B = 685.0 - 2 * 129280 * 7168 / 1e9


@pytest.mark.parametrize(("run_id", "published_b", "mtp"), [("deepseek-v3-2048-h800", 671.0, False),
                                                            ("deepseek-v3-2048-h800", V3_WITH_MTP_B, True),
                                                            ("deepseek-v2-h800", 236.0, False)])
def test_param_count_of_mla_models_is_their_published_total(run_id: str, published_b: float, mtp: bool) -> None:
    """DeepSeek-V3 671B (arXiv 2412.19437 abstract, without the MTP module) and with its one MTP module (an MoE
    layer and the 2h x h projection), DeepSeek-V2 236B (arXiv 2405.04434 abstract): MLA's five attention matrices
    per layer, not the standard h x (q + 2kv) + q x h."""
    import json

    from engine.validation.runs import HOLDOUT_RUNS

    runs = json.loads(HOLDOUT_RUNS.read_text(encoding="utf-8"))["runs"]
    model = dict(next(r for r in runs if r["id"] == run_id)["scenario"]["model"])
    if not mtp:
        model.pop("mtp_layers", None)
    assert param_count(model) / 1e9 == pytest.approx(published_b, rel=0.005)
