"""HSDP (training.shard_group, issue #22 item 7): ZeRO shards over a group of g consecutive data x context parallel
ranks and replicates across the d c / g groups; each shard's gradients are all-reduced across the replicas once per
step. Closed forms with the linear collective model (bus bytes / BW) and hand-written shapes."""

from __future__ import annotations

import numpy as np
import pytest

from engine.document.parse import parse_scenario
from engine.errors import LAYOUT_CONFLICT, ScenarioError
from engine.performance.api import candidate_layouts, predict
from engine.performance.frameworks import layout_profiles
from engine.performance.terms.data_parallel import data_parallel_sync
from engine.performance.terms.groups import ParallelGroup, fabric_groups, shard_shapes
from engine.performance.terms.sharding import state_bytes
from tests.engine._scenarios import LLAMA_7B, scenario
from tests.engine.performance._build import BW, LinearComm, build, dense_doc

P = 1.0e9


def test_shard_group_sets_the_shard_and_replica_ranks() -> None:
    _, _, shape = build(dense_doc(zero=1, shard_group=4))  # tp 8 on 64 GPUs: d = 8
    assert shape.grad_reduce_ranks[0] == 8
    assert shape.zero_shard_ranks[0] == 4 and shape.replica_ranks[0] == 2
    _, _, plain = build(dense_doc(zero=1))
    assert plain.zero_shard_ranks[0] == 8 and plain.replica_ranks[0] == 1


def test_zero1_with_hsdp_reduce_scatters_in_the_group_and_all_reduces_the_shard_across_replicas() -> None:
    """g = 4 of d = 8: RS of P x 4 B and AG of P x 2 B over the shard group, then an all-reduce of the shard
    (P x 4 B / 4) across the 2 replicas (bus bytes 2x): exposed whole with no window."""
    ctx, lay, shape = build(dense_doc(zero=1, shard_group=4, framework="megatron-core"))
    comm = LinearComm()
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    dp = data_parallel_sync(lay, shape, prof, comm, np.array([P]), np.array([0.0]), np.array([0.0]))
    replica = 2.0 * (P * 4.0 / 4.0) / BW
    assert dp.replica_allreduce_s[0] == pytest.approx(replica, rel=1e-12)
    assert dp.exposed_s[0] == pytest.approx(P * 4.0 / BW + P * 2.0 / BW + replica, rel=1e-12)
    assert ("replica", "ar", P * 4.0 / 4.0) in [(g, str(k), b) for g, k, b in comm.calls]


def test_without_hsdp_nothing_crosses_replicas() -> None:
    ctx, lay, shape = build(dense_doc(zero=1, framework="megatron-core"))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    dp = data_parallel_sync(lay, shape, prof, LinearComm(), np.array([P]), np.array([0.0]), np.array([0.0]))
    assert dp.replica_allreduce_s[0] == 0.0
    assert dp.exposed_s[0] == pytest.approx(P * 6.0 / BW, rel=1e-12)


def test_zero3_with_hsdp_exposes_the_replica_all_reduce() -> None:
    ctx, lay, shape = build(dense_doc(zero=3, shard_group=2, framework="fsdp", tp=1, sp=False))  # d = 64, g = 2
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    dp = data_parallel_sync(lay, shape, prof, LinearComm(), np.array([P]), np.array([0.0]), np.array([0.0]))
    replica = 2.0 * (P * 2.0 / 2.0) / BW  # bf16 gradients with ZeRO-3, half each, all-reduced over 32 replicas
    assert dp.replica_allreduce_s[0] == pytest.approx(replica, rel=1e-12)
    assert dp.exposed_s[0] == pytest.approx(replica, rel=1e-12)


def test_states_shard_over_the_group() -> None:
    """ZeRO-3 over g = 4: weights 2 B, gradients 4 B and Adam 12 B per parameter, each / 4."""
    ctx, lay, shape = build(dense_doc(zero=3, shard_group=4, framework="fsdp"))
    prof = layout_profiles(ctx.framework, lay.tp, lay.pp)
    assert state_bytes(lay, prof, np.array([P]), shape.zero_shard_ranks)[0] == pytest.approx(P * 18.0 / 4.0)


def test_shard_and_replica_group_shapes() -> None:
    """Inner order (t = 8, c = 1, d = 8, g = 4): the shard group is 4 ranks at stride 8, the replica group 2 ranks
    at stride 8 x 4 = 32. Outer order with c = 2, d = 4, p = 2 (t c p = 32), g = 4 = 2 CP ranks x 2 DP blocks:
    shard = 2 ranks at stride t in each of 2 blocks 32 apart; replica = 2 ranks 64 apart."""
    _, lay, _ = build(dense_doc(zero=1, shard_group=4))
    shard, replica = shard_shapes(lay, np.array([4.0]), np.array([8.0]))
    assert [float(x[0]) for x in shard] == [1.0, 1.0, 4.0, 8.0]
    assert [float(x[0]) for x in replica] == [1.0, 1.0, 2.0, 32.0]
    doc = dense_doc(zero=1, tp=8, pp=2, cp=2, shard_group=4, gb=64)
    doc["parallelism"]["dp_placement"] = "outer"
    ctx, lay, _ = build(doc)
    assert (lay.dp[0], lay.cp[0], bool(lay.dp_outer[0])) == (2.0, 2.0, True)
    groups = fabric_groups(ctx, lay)
    assert groups.ranks[ParallelGroup.SHARD][0] == 4 and groups.ranks[ParallelGroup.REPLICA][0] == 1
    shard, replica = shard_shapes(lay, np.array([2.0]), np.array([32.0]))  # g = c: one CP block per shard group
    assert [float(x[0]) for x in shard] == [2.0, 8.0, 1.0, 32.0]
    assert [float(x[0]) for x in replica] == [1.0, 1.0, 2.0, 32.0]


def test_a_group_that_fits_no_layout_is_refused_naming_the_field() -> None:
    doc = dense_doc(zero=1, shard_group=3)
    with pytest.raises(ScenarioError) as err:
        candidate_layouts(parse_scenario(doc))
    assert err.value.field == "training.shard_group" and err.value.code == LAYOUT_CONFLICT
    searched = scenario(model=LLAMA_7B, training={"global_batch": 64, "zero": 3, "shard_group": 8},
                        parallelism={"tp": "auto", "pp": 1, "cp": 1, "ep": 1, "vpp": 1}, cluster={"gpus": 64})
    lay = candidate_layouts(parse_scenario(searched))
    assert np.all(np.mod(lay.dp * lay.cp, 8) == 0)


def test_hsdp_in_one_node_trades_memory_for_fast_gathers() -> None:
    """ZeRO-3 on 64 H100 (8 nodes), pure data parallel: sharding within a node (g = 8) holds 8x the states of
    sharding over all 64 ranks but gathers over NVLink, so its exposed per-layer traffic is smaller."""
    def run(group: object) -> object:
        return predict(scenario(model=LLAMA_7B, training={"global_batch": 64, "micro_batch": 1, "zero": 3,
                                                          "recompute": "none", "shard_group": group,
                                                          "framework": "fsdp"},
                                parallelism={"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vpp": 1,
                                             "sequence_parallel": False},
                                cluster={"gpus": 64, "nic_gbps": 100}))
    full, node = run("auto"), run(8)
    assert node.memory_gb_per_gpu > full.memory_gb_per_gpu
    assert node.breakdown_s["dp_comm_exposed"] < full.breakdown_s["dp_comm_exposed"]
