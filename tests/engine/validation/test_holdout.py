"""Accuracy on HOLDOUT published runs (tests/data/holdout_runs.json), never used to set any constant.

Bounds are what the engine honestly achieves (docs/validation.md), not targets it was tuned to:
all rows MAPE <= 15% and worst <= 30%; the dense-model rows worst <= 30%; the MoE rows (DeepSeek-V2
and V3 on H800) worst <= 30% (both predicted fast, V2 by 23%, V3 by 10% with the expert load imbalance of
moe_balance.py: MLA approximated, partial recomputation and routing kernels not modelled;
docs/performance-model.md section 11).
"""

from __future__ import annotations

import json

import pytest

from engine.validation.rows import summary, validation_rows
from engine.validation.runs import COMPARABLE, DEFAULT_RUNS, HOLDOUT_RUNS, load_runs
from tests.engine._scenarios import report_rows


@pytest.fixture(scope="module")
def runs():
    return load_runs(HOLDOUT_RUNS)


@pytest.fixture(scope="module")
def rows(runs):
    return validation_rows(runs)




def test_holdout_rows_are_sourced_and_disjoint_from_the_reference(runs) -> None:
    assert len(runs) >= 8
    ref_ids = {r["id"] for r in load_runs(DEFAULT_RUNS)}
    for run in runs:
        assert run["id"] not in ref_ids
        assert run["source"] and run["notes"]
        assert len(run["measured"]) == 1 and next(iter(run["measured"])) in COMPARABLE
    gpus = {r["scenario"]["cluster"]["gpu"] for r in runs}
    assert {"A100-80GB", "H100-SXM", "H800"} <= gpus
    assert any(r["scenario"]["training"]["precision"] == "fp8" for r in runs)
    assert any(r["scenario"]["model"].get("moe") for r in runs)


def test_holdout_mape_and_worst(rows) -> None:
    s = summary(rows)
    assert s["mape"] <= 0.15, report_rows(rows)
    assert s["worst"] <= 0.30, report_rows(rows)


def test_holdout_dense_rows_worst(runs, rows) -> None:
    dense = [row for run, row in zip(runs, rows, strict=True) if not run["scenario"]["model"].get("moe")]
    assert summary(dense)["worst"] <= 0.30, report_rows(dense)


def test_holdout_moe_rows_worst(runs, rows) -> None:
    moe = [row for run, row in zip(runs, rows, strict=True) if run["scenario"]["model"].get("moe")]
    assert len(moe) >= 2
    assert summary(moe)["worst"] <= 0.30, report_rows(moe)


def test_holdout_check_is_not_vacuous(rows) -> None:
    off = [abs(r.predicted * 1.5 - r.measured) / r.measured for r in rows]
    assert sum(off) / len(off) > 0.15


def test_holdout_file_is_valid_json_with_about(runs) -> None:
    doc = json.loads(HOLDOUT_RUNS.read_text(encoding="utf-8"))
    assert "HOLDOUT" in doc["about"]
    assert doc["runs"] == runs


# ---- physics added with the holdout (generic, not per row)

def _a100_scenario(**training):
    run = next(r for r in load_runs(DEFAULT_RUNS) if r["id"] == "megatron-sc21-table1-1.7B")
    sc = json.loads(json.dumps(run["scenario"]))
    sc["training"].update(training)
    return sc


def test_unfused_attention_is_the_ampere_default_and_slower_than_flash() -> None:
    from engine.performance.api import predict

    auto = predict(_a100_scenario())
    unfused = predict(_a100_scenario(attention="unfused"))
    flash = predict(_a100_scenario(attention="flash"))
    assert auto.step_time_s == pytest.approx(unfused.step_time_s)
    assert flash.step_time_s < 0.9 * unfused.step_time_s
    # materialised scores cost memory unless the attention core is recomputed
    none_unf = predict(_a100_scenario(attention="unfused", recompute="none", micro_batch=1))
    none_fl = predict(_a100_scenario(attention="flash", recompute="none", micro_batch=1))
    assert none_unf.memory_gb_per_gpu > none_fl.memory_gb_per_gpu


def test_head_dim_scales_attention_flops_and_keeps_old_documents_canonical() -> None:
    from engine.document.parse import parse_scenario
    from engine.performance.api import predict
    from engine.schema.types import scenario_to_dict

    base = _a100_scenario()
    assert "head_dim" not in scenario_to_dict(parse_scenario(base))["model"]
    assert "attention" not in scenario_to_dict(parse_scenario(base))["training"]
    wide = json.loads(json.dumps(base))
    wide["model"]["head_dim"] = 2 * base["model"]["hidden"] // base["model"]["heads"]
    assert scenario_to_dict(parse_scenario(wide))["model"]["head_dim"] == wide["model"]["head_dim"]
    r0, r1 = predict(base), predict(wide)
    assert r1.model_tflops_per_gpu * r1.step_time_s > 1.2 * r0.model_tflops_per_gpu * r0.step_time_s


def test_fp8_cast_traffic_is_charged() -> None:
    from engine.performance.api import predict

    run = next(r for r in load_runs(HOLDOUT_RUNS) if r["id"] == "llm-foundry-mpt3b-h100-8-fp8")
    fp8 = predict(run["scenario"])
    bf16_sc = json.loads(json.dumps(run["scenario"]))
    bf16_sc["training"]["precision"] = "bf16"
    bf16 = predict(bf16_sc)
    assert 1.0 < bf16.step_time_s / fp8.step_time_s < 1.8  # casts and bf16 attention keep fp8 far from 2x


# ---- MoE physics (generic, not per row)

def _moe_scenario(**over):
    run = next(r for r in load_runs(HOLDOUT_RUNS) if r["id"] == "deepseek-v3-2048-h800")
    sc = json.loads(json.dumps(run["scenario"]))
    sc["training"]["micro_batch"] = 1
    sc["parallelism"]["vpp"] = 1
    for section, values in over.items():
        sc[section].update(values)
    return sc


class _Coll:
    """The collective model bound to one scenario's fabric (engine/performance/collectives/)."""

    def __init__(self, ctx):
        self.ctx, self.net = ctx, ctx.net

    def moe_a2a(self, tok, elem_bytes, n, stride):
        from engine.performance.collectives.moe_dispatch import moe_alltoall_time

        return moe_alltoall_time(self.net, tok, self.ctx.hidden * elem_bytes, self.ctx.top_k, n, stride)

    def time(self, kind, nbytes, n, stride):
        from engine.performance.collectives.kinds import CollectiveKind
        from engine.performance.collectives.tuning import collective_time

        return collective_time(self.net, CollectiveKind(kind), nbytes, n, stride)


def _ctx_coll(sc):
    from engine.document.parse import parse_scenario
    from engine.performance.context import make_context
    from engine.performance.hardware import gpu_spec

    s = parse_scenario(sc)
    ctx = make_context(s, gpu_spec(s.cluster.gpu))
    return ctx, _Coll(ctx)


def test_moe_dispatch_is_deduplicated_per_node_and_fp8_halves_it() -> None:
    import numpy as np

    ctx, coll = _ctx_coll(_moe_scenario())
    one = np.ones(1)
    tok = 4096.0 * one
    bf16 = coll.moe_a2a(tok, 2.0, 64.0 * one, one)[0]
    fp8 = coll.moe_a2a(tok, 1.0, 64.0 * one, one)[0]
    assert 0.45 < fp8 / bf16 < 0.55
    # 8 nodes, top-8: 7 x (1 - (7/8)^8) = 4.6 remote-node copies per token instead of 8 x 56/64 = 7
    naive = coll.time("a2a", tok * ctx.top_k * ctx.hidden * 2.0, 64.0 * one, one)[0]
    assert 0.55 < bf16 / naive < 0.75
    # top_k = 1 degenerates to the plain all-to-all volume
    ctx1, coll1 = _ctx_coll(_moe_scenario(model={"moe": {"experts": 256, "top_k": 1, "expert_ffn_hidden": 2048}}))
    plain = coll1.time("a2a", tok * ctx1.hidden * 2.0, 64.0 * one, one)[0]
    assert coll1.moe_a2a(tok, 2.0, 64.0 * one, one)[0] == pytest.approx(plain, rel=0.02)


def test_moe_all_to_all_overlaps_other_micro_batches_only_with_pipelining() -> None:
    from engine.performance.api import predict

    piped = predict(_moe_scenario())
    flat = predict(_moe_scenario(parallelism={"pp": 1, "dp": 2048}, training={"global_batch": 16384}))
    # the flat layout (EP 64 with 2,048-way data parallelism) does not fit in memory: its communication share is
    # read from what it would reach with enough memory (Result.unconstrained)
    figures = [r.to_dict() if r.fits else dict(r.unconstrained or {}) for r in (piped, flat)]
    piped_share, flat_share = (f["breakdown_s"]["ep_comm"] / f["step_time_s"] for f in figures)
    assert piped_share < 0.1 < flat_share


def test_moe_expert_states_shard_over_expert_data_parallel_group() -> None:
    from engine.performance.api import predict

    low = predict(_moe_scenario(parallelism={"ep": 8}))
    high = predict(_moe_scenario(parallelism={"ep": 128}))
    # 16x more experts per GPU at ep 8, but their Adam states shard 16x wider: weights+grads dominate
    assert low.memory_gb_per_gpu > high.memory_gb_per_gpu
