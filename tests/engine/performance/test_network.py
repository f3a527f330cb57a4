"""Issue #10: the network drives the numbers (oversubscription, routing, NCCL collectives, stragglers)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.fabric.routing import crossing_share, full_load_efficiency
from engine.performance.api import predict
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.tuning import collective_time
from engine.performance.context import make_context
from engine.performance.hardware import gpu_spec
from engine.performance.terms.stragglers import expected_max_z
from engine.validation.rows import summary, validation_rows
from engine.validation.runs import FABRIC_MEASUREMENTS, NETWORK_RUNS, load_runs
from tests.engine._scenarios import dp_heavy, report_rows, scenario
from tests.paths import ROOT


def _step(**cluster: object) -> float:
    return predict(dp_heavy(**cluster)).step_time_s


@pytest.mark.parametrize("topology", ["fat-tree", "rail-optimized"])
def test_leaf_oversubscription_slows_a_1024_gpu_dp_job_without_pod_gpus(topology: str) -> None:
    t1, t2, t4 = (_step(oversubscription=r, topology=topology) for r in (1.0, 2.0, 4.0))
    assert t2 > 1.02 * t1, (t1, t2)
    assert t4 > 1.03 * t2, (t2, t4)


def test_infiniband_adaptive_beats_roce_ecmp_margin_shrinks_with_qps_and_vanishes_with_adaptive() -> None:
    ib = _step(fabric="infiniband", routing="adaptive", nic_gbps=200)
    ecmp = _step(fabric="roce", routing="ecmp", nic_gbps=200) / ib - 1.0
    qp = _step(fabric="roce", routing="ecmp-qp", nic_gbps=200) / ib - 1.0
    ada = _step(fabric="roce", routing="adaptive", switch="SN5600", nic_gbps=200) / ib - 1.0
    # sourced shares behind the margin: ECMP 1 - 1/e at full load with one flow (Spectrum-X claim: 60%),
    # adaptive 0.95-0.97, QP scaling +27% (Meta: up to +40%)
    assert 0.02 < ecmp < 0.15
    assert 0.0 < qp < 0.6 * ecmp
    assert abs(ada) < 0.25 * ecmp and abs(ada) < 0.01


def test_routing_shares_match_the_sourced_figures() -> None:
    meas = {m["id"]: m for m in json.loads(FABRIC_MEASUREMENTS.read_text())["measurements"]}
    claim = meas["nvidia-spectrumx-colossus-claim"]["values"]
    # one hashed flow per NIC at full load: balls into bins, 1 - 1/e (simulated table: 0.635, issue #13)
    assert float(crossing_share("ecmp", "roce", 1.0, 1.0)[()]) == pytest.approx(1 - np.exp(-1), abs=0.01)
    assert abs(float(crossing_share("ecmp", "roce", 1.0, 1.0)[()]) - float(claim["data_throughput_standard_Ethernet"][:-1]) / 100) < 0.05
    assert full_load_efficiency("adaptive", "roce") == pytest.approx(float(claim["data_throughput_SpectrumX"][:-1]) / 100)
    gain = full_load_efficiency("ecmp-qp", "roce") / full_load_efficiency("ecmp", "roce") - 1.0
    assert 0.10 < gain <= 0.40  # Meta: E-ECMP + QP scaling "up to +40%"
    pinned = float(crossing_share("pinned", "roce", 1.0, 2.0)[()])
    assert pinned < 0.70  # Meta: path pinning ">30%" degradation


@pytest.mark.parametrize("routing", ["ecmp", "ecmp-qp", "adaptive", "pinned"])
def test_routing_share_monotone_in_load_and_flows(routing: str) -> None:
    loads = np.linspace(0.05, 6.0, 60)
    for fabric in ("infiniband", "roce"):
        share = crossing_share(routing, fabric, loads, 2.0)
        carried = share * loads
        assert np.all(np.diff(carried) >= -1e-9)  # more offered traffic never carries less
        assert np.all(share <= 1.0 + 1e-12) and np.all(share > 0)
        assert np.all(crossing_share("adaptive", fabric, loads, 2.0) >= share - 1e-12)


def test_nccl_ramp_latency_bound_to_bandwidth_bound() -> None:
    s = parse_scenario(scenario(cluster={"gpus": 128}))
    net = make_context(s, gpu_spec("H100-SXM")).net
    one = np.ones(1)
    sizes = 2.0 ** np.arange(10, 32)
    t = np.array([collective_time(net, CollectiveKind.ALL_REDUCE, b * one, 128 * one, one)[0] for b in sizes])
    busbw = 2 * 127 / 128 * sizes / t
    assert np.all(np.diff(busbw) > 0)  # bus bandwidth grows with the message (latency -> bandwidth)
    assert t[0] < 100e-6  # small messages: tens of microseconds (nccl-tests 16-node small-size latency)
    node_nic = 8 * net.nic_bw_gpu
    assert 0.8 * node_nic < busbw[-1] <= node_nic  # large: the node's NICs (less the crossing share)
    half = sizes[np.argmax(busbw > 0.5 * busbw[-1])]
    assert 2**18 <= half <= 2**25


def test_pat_makes_one_rank_per_node_all_gather_logarithmic() -> None:
    s = parse_scenario(scenario(cluster={"gpus": 4096}, training={"global_batch": 4096}))
    net = make_context(s, gpu_spec("H100-SXM")).net
    one = np.ones(1)
    small = 64e3 * one
    t512 = collective_time(net, CollectiveKind.ALL_GATHER, small, 512 * one, 8 * one)[0]
    t64 = collective_time(net, CollectiveKind.ALL_GATHER, small, 64 * one, 8 * one)[0]
    assert t512 < 2.5 * t64  # log2 steps, not n-1


def test_stragglers_grow_with_ranks_and_show_in_breakdown() -> None:
    z = expected_max_z(np.array([1.0, 2.0, 8.0, 1024.0, 16384.0]))
    assert z[0] == 0.0 and np.all(np.diff(z) > 0)
    assert z[3] == pytest.approx(3.2, abs=0.1)  # tabulated E[max] of 1,024 normals: 3.19
    small = predict(scenario(cluster={"gpus": 64}))
    big = predict(dp_heavy())
    assert small.breakdown_s["stragglers"] > 0
    assert (big.breakdown_s["stragglers"] / big.breakdown_s["compute"]
            > small.breakdown_s["stragglers"] / small.breakdown_s["compute"])


def test_zero2_reduces_per_micro_batch_and_is_not_free() -> None:
    z1 = predict(dp_heavy(nic_gbps=100) | {})
    doc = dp_heavy(nic_gbps=100)
    doc["training"]["zero"] = 2
    doc["training"]["global_batch"] = 4096  # 4 micro-batches per step
    doc1 = json.loads(json.dumps(doc))
    doc1["training"]["zero"] = 1
    r2, r1 = predict(doc), predict(doc1)
    assert r2.breakdown_s["dp_comm_exposed"] > r1.breakdown_s["dp_comm_exposed"]
    assert z1.fits


def test_unfit_layout_has_null_throughput() -> None:
    doc = scenario(cluster={"gpus": 8}, parallelism={"tp": 8, "pp": 1, "cp": 1},
                   training={"global_batch": 8, "micro_batch": 8, "recompute": "none"})
    doc["model"].update(layers=200, hidden=16384, heads=128, ffn_hidden=65536)
    r = predict(doc)
    assert not r.fits
    d = r.to_dict()
    for key in ("step_time_s", "mfu", "tokens_per_s", "time_to_train_days"):
        assert d[key] is None


def test_network_bound_rows() -> None:
    rows = validation_rows(load_runs(NETWORK_RUNS))
    s = summary(rows)
    assert s["rows"] == 10
    # issue #22's per-set ceiling ("no set above 12%") holds over every row. (It was 10% until engine 2.16.0 charged
    # the node boundary of Fire-Flyer's TP2 DP2 PP10 pipeline on its one NIC per 8 GPUs: that 40-GPU row went from
    # +5% to +13%, a node the engine cannot draw - PCIe cards with NVLink pairs - whose 320-GPU step now matches.)
    assert s["mape"] <= 0.12, report_rows(rows)
    # every row but one is within 25%: the Megatron-LM arm of MegaScale-MoE is predicted fast, by more than the
    # communication explains (its all-gather dispatcher is modelled, tests/engine/
    # test_moe_dispatcher.py; the source's own TP+TP no-overlap variant is ~1.4x faster than that arm,
    # tests/engine/performance/test_moe_kernels.py reproduces the communication part); reported, not hidden
    weak = [r for r in rows if r.run_id == "megascale-moe-352b-megatronlm-1440"]
    met = [r for r in rows if r not in weak]
    assert len(met) == 9 and len(weak) == 1
    assert summary(met)["worst"] <= 0.25, report_rows(rows)
    assert weak[0].error < 0  # still optimistic: if it ever flips, the explanation above is wrong


def _with(doc: dict, **training: object) -> dict:
    out = json.loads(json.dumps(doc))
    out["training"].update(training)
    return out


def test_framework_profiles_change_what_is_hidden() -> None:
    doc = dp_heavy(nic_gbps=100)
    doc["training"]["zero"] = 2
    doc["training"]["global_batch"] = 4096
    ds = predict(_with(doc, framework="deepspeed"))  # overlap_comm off for ZeRO-1/2
    fsdp = predict(_with(doc, framework="fsdp"))
    assert ds.breakdown_s["dp_comm_exposed"] > fsdp.breakdown_s["dp_comm_exposed"] > 0
    tp_doc = scenario(parallelism={"tp": 8, "pp": 1, "cp": 1})
    mcore = predict(_with(tp_doc, framework="megatron-core"))
    nemo = predict(_with(tp_doc, framework="nemo"))  # userbuffer TP overlap
    assert nemo.breakdown_s["tp_comm"] < mcore.breakdown_s["tp_comm"]
    # Megatron's distributed optimizer keeps the full fp32 gradient buffer: ZeRO-2 costs ZeRO-1's memory
    mz2 = predict(_with(tp_doc, framework="megatron-core", zero=2))
    mz1 = predict(_with(tp_doc, framework="megatron-core", zero=1))
    assert mz2.memory_gb_per_gpu == pytest.approx(mz1.memory_gb_per_gpu)
    assert predict(_with(tp_doc, framework="fsdp", zero=2)).memory_gb_per_gpu < mz1.memory_gb_per_gpu


def test_llama3_405b_with_metas_layout_fits_in_80gb() -> None:
    from engine.validation.runs import DEFAULT_RUNS

    run = next(r for r in load_runs(DEFAULT_RUNS) if r["id"] == "llama3-405b-8192-cp1")
    doc = json.loads(json.dumps(run["scenario"]))
    doc["parallelism"]["vpp"] = 4
    doc["training"]["micro_batch"] = 1
    r = predict(doc)
    assert r.fits and r.memory_gb_per_gpu < 80.0 < r.memory_limit_gb + 1.0
    assert r.parallelism["recompute"] == "none"


def unconstrained(r: Any) -> dict[str, Any]:
    """A result's figures: its own when it fits, else what it would reach with unlimited memory."""
    return {"breakdown_s": r.breakdown_s, "step_time_s": r.step_time_s} if r.fits else dict(r.unconstrained)


def test_context_parallelism_costs_short_attention_blocks() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_engine import scenario as llama405

    fixed = {"tp": 8, "pp": 16, "vpp": 1, "ep": 1, "sequence_parallel": True}
    cp1 = predict(llama405({**fixed, "cp": 1}, 16384))
    cp8 = predict(llama405({**fixed, "cp": 8}, 16384))
    # same GPUs, same global batch: CP 8 runs 1K-token attention blocks (8 kernel pairs per layer) and
    # its K/V ring crosses nodes, so it does more compute-seconds per step and exposes CP traffic
    # these 405B layouts need more memory than an H100 has: the physics is read from what they would reach
    # with enough memory (Result.unconstrained); their public figures are None
    cp1_b, cp8_b = unconstrained(cp1)["breakdown_s"], unconstrained(cp8)["breakdown_s"]
    assert cp8_b["cp_comm"] > 0 == cp1_b["cp_comm"]
    assert cp8_b["compute"] > cp1_b["compute"] * 1.005


def test_sharp_halves_inter_node_all_reduce_traffic() -> None:
    import dataclasses

    s = parse_scenario(scenario(cluster={"gpus": 1024}, training={"global_batch": 1024}))
    ctx = make_context(s, gpu_spec("H100-SXM"))
    plain, sharp = ctx.net, dataclasses.replace(ctx, sharp=True).net
    one = np.ones(1)
    big = 1e9 * one
    t_plain = collective_time(plain, CollectiveKind.ALL_REDUCE, big, 1024 * one, one)[0]
    t_sharp = collective_time(sharp, CollectiveKind.ALL_REDUCE, big, 1024 * one, one)[0]
    assert 0.45 < t_sharp / t_plain < 0.75  # each byte crosses the NIC once each way, not 2(n-1)/n
    # all-gather and reduce-scatter have nothing to reduce in the switch
    ag = CollectiveKind.ALL_GATHER
    assert collective_time(sharp, ag, big, 1024 * one, one)[0] == collective_time(plain, ag, big, 1024 * one, one)[0]


def test_in_network_reduction_speeds_up_data_parallel_all_reduce_end_to_end() -> None:
    doc = dp_heavy(nic_gbps=100)
    doc["training"]["zero"] = 0  # plain all-reduce of gradients
    plain = predict(doc)
    doc["cluster"]["in_network_reduction"] = True
    sharp = predict(doc)
    p, s = unconstrained(plain), unconstrained(sharp)
    assert s["breakdown_s"]["dp_comm_exposed"] < 0.6 * p["breakdown_s"]["dp_comm_exposed"]
    assert s["step_time_s"] < p["step_time_s"]
