"""Expert load imbalance in dropless MoE (engine/performance/terms/moe_balance.py): the busiest EP rank sets the pace."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from engine.performance.api import predict
from engine.performance.terms import moe_balance
from engine.performance.terms.moe_balance import busiest_rank_factor, rank_load_cv
from tests.engine._scenarios import scenario


def _moe(ep: int, tokens_mb: int = 1, experts: int = 32, top_k: int = 2) -> dict:
    doc = scenario(cluster={"gpus": 64}, parallelism={"tp": 1, "pp": 1, "cp": 1, "ep": ep},
                   training={"global_batch": 64 * tokens_mb, "micro_batch": tokens_mb, "recompute": "none",
                             "zero": 1})
    doc["model"].update(layers=16, hidden=2048, heads=16, kv_heads=8, ffn_hidden=8192, seq_len=4096,
                        moe={"experts": experts, "top_k": top_k, "expert_ffn_hidden": 2048})
    return doc


def test_no_expert_parallelism_no_imbalance() -> None:
    assert float(busiest_rank_factor(64.0, np.array([1.0]), np.array([4096.0]))[0]) == 1.0


def test_busiest_rank_grows_with_ep_ranks() -> None:
    eps = np.array([2.0, 4.0, 8.0, 16.0, 64.0])
    f = busiest_rank_factor(256.0, eps, np.full(5, 8192.0))
    assert np.all(np.diff(f) > 0), f
    assert f[0] > 1.0


def test_fewer_tokens_per_rank_more_imbalance() -> None:
    # balls into bins: the sampling spread is sqrt((1 - 1/ep) / assignments)
    few, many = busiest_rank_factor(64.0, np.array([8.0, 8.0]), np.array([256.0, 65536.0]))
    assert few > many > 1.0
    samp = float(rank_load_cv(64.0, np.array([8.0]), np.array([1000.0]), cv_e=0.0)[0])
    assert samp == pytest.approx(np.sqrt((1 - 1 / 8) / 1000.0))


def test_more_local_experts_average_out_preference() -> None:
    # a rank holding g of E experts: preference spread cv_e sqrt((E-g)/(g(E-1))), zero when g = E
    huge = np.array([1e12])
    cv_small_g = float(rank_load_cv(64.0, np.array([32.0]), huge)[0])  # g = 2
    cv_big_g = float(rank_load_cv(64.0, np.array([2.0]), huge)[0])  # g = 32
    assert cv_small_g > cv_big_g > 0
    assert float(rank_load_cv(64.0, np.array([1.0]), huge)[0]) == pytest.approx(0.0, abs=1e-6)
    g = 2.0
    assert cv_small_g == pytest.approx(moe_balance.EXPERT_LOAD_CV * np.sqrt((64 - g) / (g * 63)), rel=1e-3)


def test_imbalance_slows_moe_layouts_and_only_with_expert_parallelism(monkeypatch: pytest.MonkeyPatch) -> None:
    with_imb = {ep: predict(_moe(ep)) for ep in (1, 8)}
    monkeypatch.setattr(moe_balance, "EXPERT_LOAD_CV", 0.0)
    no_pref = {ep: predict(_moe(ep)) for ep in (1, 8)}
    # without EP every expert is local: nothing to wait for
    assert with_imb[1].step_time_s == pytest.approx(no_pref[1].step_time_s, rel=1e-12)
    # with EP 8 the busiest rank is slower than the mean: compute and all-to-all both grow
    assert with_imb[8].step_time_s > 1.01 * no_pref[8].step_time_s
    assert with_imb[8].breakdown_s["compute"] > no_pref[8].breakdown_s["compute"]
    # model FLOPs (and so the MFU numerator) are unchanged: imbalance is time, not work
    assert with_imb[8].mfu < no_pref[8].mfu
    assert with_imb[8].mfu * with_imb[8].step_time_s == pytest.approx(no_pref[8].mfu * no_pref[8].step_time_s,
                                                                     rel=1e-9)


def test_imbalance_adds_to_the_all_to_all(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _moe(8)
    doc["cluster"]["gpus_per_node"] = 8
    doc["parallelism"]["ep"] = 16  # across two nodes: the dispatch crosses the NICs
    base = predict(copy.deepcopy(doc))
    monkeypatch.setattr(moe_balance, "EXPERT_LOAD_CV", 0.0)
    flat = predict(copy.deepcopy(doc))
    assert base.breakdown_s["ep_comm"] >= flat.breakdown_s["ep_comm"]
    assert base.step_time_s > flat.step_time_s


def test_named_megatron_core_exposes_the_expert_all_to_all_auto_hides_it() -> None:
    # Megatron-Core's overlap_moe_expert_parallel_comm defaults to False (frameworks.py); auto assumes the
    # steady-state overlap of the large MoE stacks (DualPipe, MegaScale-MoE)
    doc = _moe(16)
    doc["cluster"].update(gpus=128, gpus_per_node=8, nic_gbps=100)
    doc["parallelism"].update(pp=4, ep=16)
    doc["training"].update(global_batch=512, micro_batch=1)
    auto = predict(copy.deepcopy(doc))
    doc["training"]["framework"] = "megatron-core"
    mcore = predict(doc)
    assert auto.breakdown_s["ep_comm"] < 0.8 * mcore.breakdown_s["ep_comm"], (auto.breakdown_s, mcore.breakdown_s)
    assert mcore.step_time_s > auto.step_time_s
