"""One scenario, one cluster: predict, tco and save-time validation read the same parsed scenario and topology.

Each test would fail if performance and cost sized different clusters (the 4,096 x H100 at 800G case used to
assume 3 tiers in perf while sizing built 2), or if one entry point accepted what another refuses.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from engine.cost.tco import tco
from engine.document.parse import parse_cluster, parse_scenario, topology_for
from engine.document.validate import validate_scenario
from engine.errors import ScenarioError
from engine.fabric.topology import fabric_block
from engine.performance.api import predict
from engine.schema.types import scenario_to_dict
from tests.engine._scenarios import LLAMA_7B, dp_heavy, scenario


def dp_job(gpus: int, **cluster: Any) -> dict[str, Any]:
    """A fixed data-parallel 7B layout (no search: one candidate), so each case is one model evaluation."""
    return scenario(
        model=LLAMA_7B,
        training={"global_batch": gpus, "micro_batch": 1, "recompute": "none", "zero": 1, "tokens": 1e12},
        parallelism={"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": False},
        cluster={"gpus": gpus, **cluster},
    )


def refusal(fn: Callable[[dict[str, Any]], Any], doc: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        fn(copy.deepcopy(doc))
    return info.value


ENTRY_POINTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "predict": predict, "tco": tco, "validate_scenario": validate_scenario,
}


# ------------------------------------------------------------------------------------- agreement


CASES = [
    (topo, fabric, gbps, gpus)
    for topo in ("fat-tree", "rail-optimized", "multi-plane")
    for fabric in ("infiniband", "roce")
    for gbps in (200, 400, 800)
    for gpus in (64, 1024, 4096, 16384)
]


@pytest.mark.parametrize(("topology", "fabric", "gbps", "gpus"), CASES)
def test_predict_and_tco_agree_on_the_cluster(topology: str, fabric: str, gbps: int, gpus: int) -> None:
    """Same tiers and switch counts from predict, tco and the parsed topology — or the same refusal."""
    doc = dp_job(gpus, topology=topology, fabric=fabric, nic_gbps=gbps)
    try:
        s = parse_scenario(copy.deepcopy(doc))
    except ScenarioError as exc:  # unbuildable: every entry point refuses it, naming the same field
        for name, fn in ENTRY_POINTS.items():
            assert refusal(fn, doc).field == exc.field, name
        return
    topo = s.topo
    out = tco(copy.deepcopy(doc))
    perf = predict(copy.deepcopy(doc)).to_dict()
    assert s.cluster.tiers == topo.tiers == out["fabric"]["tiers"]
    assert out["fabric"]["switches"] == dict(topo.switches)
    assert out["fabric"]["links"] == dict(topo.links)
    assert out["fabric"]["switch_model"] == topo.switch
    block = fabric_block(topo)
    assert {k: out["fabric"][k] for k in block} == block  # tco's fabric block contains predict's, equal
    if "fabric" in perf:
        assert perf["fabric"] == block
    assert out["performance"] == perf  # predict returns what tco nests under performance
    # the switches really hold the NICs: leaf down ports cover every NIC, each tier's ports are not overfilled
    assert topo.switches["leaf"] * topo.leaf_down_ports >= topo.nics
    assert out["fabric"]["ports_used"] <= out["fabric"]["ports_available"]


def test_4096_h100_at_800g_is_two_tiers_everywhere() -> None:
    """The issue's case: perf assumed 3 tiers of 64-port switches; the 144-port XDR switch builds 2."""
    doc = dp_job(4096, nic_gbps=800)
    s = parse_scenario(copy.deepcopy(doc))
    assert (s.topo.switch, s.topo.radix, s.topo.tiers, s.cluster.tiers) == ("Q3400", 144, 2, 2)
    assert tco(doc)["fabric"]["tiers"] == 2


def test_explicit_tiers_are_honoured_or_refused() -> None:
    s = parse_scenario(dp_job(512, tiers=3))
    assert s.topo.tiers == 3 and s.topo.switches["core"] > 0
    assert parse_scenario(dp_job(512)).topo.tiers == 2


# ------------------------------------------------------------------------------------- refusals


BAD = {
    "2^30 GPUs": (lambda d: d["cluster"].update(gpus=2 ** 30), "cluster.gpus"),
    "tiers 1 at 16,384": (lambda d: d["cluster"].update(gpus=16384, tiers=1), "cluster.gpus"),
    "a NIC as the switch": (lambda d: d["cluster"].update(switch="CX7-400G"), "cluster.switch"),
    "zero nodes per rack": (lambda d: d.setdefault("costs", {}).update(nodes_per_rack=0), "costs.nodes_per_rack"),
    "RoCE switch on InfiniBand": (lambda d: d["cluster"].update(switch="SN5600"), "cluster.switch"),
    "adaptive on Tomahawk 5": (lambda d: d["cluster"].update(fabric="roce", switch="TH5-51T", routing="adaptive"),
                               "cluster.routing"),
    "ecmp-qp on InfiniBand": (lambda d: d["cluster"].update(routing="ecmp-qp"), "cluster.routing"),
    "unknown routing": (lambda d: d["cluster"].update(routing="spray"), "cluster.routing"),
    "unknown framework": (lambda d: d["training"].update(framework="jax"), "training.framework"),
    "unknown cost key": (lambda d: d.setdefault("costs", {}).update(electricity=0.1), "costs.electricity"),
    "qps out of bound": (lambda d: d["cluster"].update(qps_per_connection=0), "cluster.qps_per_connection"),
    "SHARP on Ethernet": (lambda d: d["cluster"].update(fabric="roce", in_network_reduction=True),
                          "cluster.in_network_reduction"),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_refuses_the_same_documents(case: str, entry: str) -> None:
    mutate, field = BAD[case]
    doc = dp_job(1024, nic_gbps=400)
    doc["training"]["global_batch"] = 16384
    mutate(doc)
    err = refusal(ENTRY_POINTS[entry], doc)
    assert err.field == field, str(err)
    assert str(err).startswith(f"{field}: ")


def test_tiers_one_message_names_the_limit() -> None:
    doc = dp_job(16384, tiers=1)
    doc["training"]["global_batch"] = 16384
    msg = str(refusal(predict, doc))
    assert "1-tier fat-tree of 64-port switches supports at most 64 endpoints" in msg
    assert "cluster.tiers=1" in msg


def test_tco_refuses_a_run_that_does_not_fit() -> None:
    """A 1T-parameter dense model on 8 GPUs: predict reports fits false; tco will not price it."""
    huge = {"name": "1T", "layers": 128, "hidden": 25600, "heads": 160, "ffn_hidden": 102400, "vocab": 128000,
            "seq_len": 4096, "gated_ffn": False}
    doc = scenario(model=huge, training={"global_batch": 8, "micro_batch": 1, "zero": 0, "recompute": "full"},
                   parallelism={"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True},
                   cluster={"gpus": 8})
    assert predict(copy.deepcopy(doc)).fits is False
    err = refusal(tco, doc)
    assert err.field == "cluster.gpu" and "does not fit in memory" in str(err)


# ------------------------------------------------------------------------------------- fabric block


def test_oversubscribed_leaf_is_reported_per_tier() -> None:
    """1,024 GPUs on a 4:1 leaf: fewer switches, and the built leaf ratio shows in both results."""
    flat = tco(dp_heavy())
    thin_doc = dp_heavy(oversubscription=4.0)
    thin = tco(copy.deepcopy(thin_doc))
    assert thin["fabric"]["switches"]["total"] < flat["fabric"]["switches"]["total"]
    assert flat["fabric"]["oversubscription"] == {"leaf": 1.0, "spine": 1.0}
    leaf = thin["fabric"]["oversubscription"]["leaf"]
    assert 3.5 <= leaf <= 4.0  # 51 down : 13 up per 64-port leaf, partly filled: 1,024 NICs over 273 uplinks
    assert leaf == pytest.approx(thin["fabric"]["links"]["node_leaf"] / thin["fabric"]["links"]["leaf_spine"])
    assert parse_scenario(thin_doc).topo.oversubscription["leaf"] == leaf


def test_pod_oversubscription_thins_the_top_tier() -> None:
    """Non-blocking pods, 2:1 above them: the leaf tier is 1:1, the spine->core tier 2:1."""
    s = parse_scenario(dp_job(16384, oversubscription=2.0, pod_gpus=512, nic_gbps=400))
    t = s.topo
    assert t.tiers == 3 and t.oversubscription["leaf"] == 1.0 and t.oversubscription["spine"] == pytest.approx(2.0)
    assert t.pod_gpus == 512 and t.hops == {"leaf": 1, "pod": 3, "core": 5}
    # without pod_gpus the pod is the physical one: k/2 = 32 leaves x 32 NICs = 1,024 GPUs at one NIC per GPU
    assert topology_for(dp_job(16384, nic_gbps=400)).pod_gpus == 1024


def test_topology_counts_where_traffic_can_stay() -> None:
    fat = topology_for(dp_job(1024))  # 64-port leaf, 32 NICs down: 4 eight-NIC nodes per leaf
    assert (fat.nodes_per_leaf, fat.leaf_gpus, fat.nvlink_domain_gpus, fat.rails) == (4.0, 32, 8, 1)
    rail = topology_for(dp_job(1024, topology="rail-optimized"))  # a leaf takes one NIC of 32 nodes
    assert (rail.nodes_per_leaf, rail.leaf_gpus, rail.rails) == (32.0, 256, 8)
    planes = topology_for(dp_job(16384, topology="multi-plane"))
    assert (planes.planes, planes.tiers, planes.nodes_per_leaf) == (8, 2, 32.0)


# ------------------------------------------------------------------------------------- new fields


def test_routing_framework_and_qps_fields() -> None:
    s = parse_scenario(dp_job(64, fabric="roce", routing="ecmp-qp"))
    assert (s.cluster.routing, s.cluster.qps_per_connection, s.topo.routing) == ("ecmp-qp", 4, "ecmp-qp")
    s = parse_scenario(dp_job(64, fabric="roce", routing="adaptive", switch="SN5600", qps_per_connection=2))
    assert (s.cluster.routing, s.cluster.qps_per_connection) == ("adaptive", 2)
    assert parse_scenario(dp_job(64)).cluster.routing == "adaptive"  # InfiniBand default
    assert parse_scenario(dp_job(64, fabric="roce")).cluster.routing == "ecmp"  # plain RoCE default
    doc = dp_job(64)
    doc["training"]["framework"] = "megatron-core"
    s = parse_scenario(doc)
    assert s.training.framework == "megatron-core"
    assert scenario_to_dict(s)["training"]["framework"] == "megatron-core"
    assert parse_scenario(dp_job(64)).training.framework is None  # auto


def test_ranges_are_parsed_once_for_predict_and_tco() -> None:
    doc = dp_job(64)
    doc["cluster"]["nic_gbps"] = {"low": 200, "likely": 400, "high": 800}
    s = parse_scenario(copy.deepcopy(doc))
    assert s.cluster.nic_gbps == 400.0 and set(s.ranges) == {"cluster.nic_gbps"}
    assert predict(copy.deepcopy(doc)).to_dict() == tco(doc)["performance"]


def test_parse_cluster_for_fleet_plans() -> None:
    c = parse_cluster({"gpu": "H100-SXM", "gpus": 4096, "nic_gbps": 400})
    assert c.tiers == 3 and c.routing == "adaptive"
    with pytest.raises(ScenarioError) as info:
        parse_cluster({"gpu": "H100-SXM", "gpus": 4096, "tiers": 1})
    assert info.value.field == "cluster.gpus"


def test_a_requested_pod_is_built_as_non_blocking_pods_under_a_thinned_core() -> None:
    """pod_gpus never adds a tier: on a cluster that fits 2 tiers the pod is clamped to the leaf (thinned above
    it); a cluster that needs 3 tiers gets pods of whole leaves, 1:1 inside pods, 4:1 above them."""
    flat = parse_scenario(dp_heavy()).topo
    two = parse_scenario(dp_heavy(oversubscription=4.0, pod_gpus=256)).topo
    assert (two.tiers, two.pod_gpus, two.oversubscription["leaf"]) == (2, two.leaf_gpus, 4.0)
    assert two.switches["total"] < flat.switches["total"]
    pods = parse_scenario(dp_job(16384, oversubscription=4.0, pod_gpus=256)).topo
    assert (pods.tiers, pods.pod_gpus, pods.oversubscription) == (3, 256, {"leaf": 1.0, "spine": 4.0})
    # a pod as wide as the cluster leaves nothing above it: the non-blocking tree, priced and simulated as such
    whole = parse_scenario(dp_heavy(oversubscription=4.0, pod_gpus=1024)).topo
    assert whole.switches == flat.switches and whole.oversubscription == {"leaf": 1.0, "spine": 1.0}
    # without pod_gpus the leaf is oversubscribed (the case) and the canonical document keeps it so
    leaf = parse_scenario(dp_heavy(oversubscription=4.0))
    assert leaf.topo.oversubscription["leaf"] > 3.5 and "pod_gpus" not in scenario_to_dict(leaf)["cluster"]
    assert parse_scenario(scenario_to_dict(leaf)).topo == leaf.topo


def test_in_network_reduction_is_a_switch_capability() -> None:
    s = parse_scenario(dp_job(1024, in_network_reduction=True))
    assert s.cluster.in_network_reduction and s.topo.in_network_reduction
    assert fabric_block(s.topo)["in_network_reduction"] is True
    assert scenario_to_dict(s)["cluster"]["in_network_reduction"] is True
    assert "in_network_reduction" not in scenario_to_dict(parse_scenario(dp_job(1024)))["cluster"]


def test_rank_assignment_is_read_refused_by_name_and_written_only_when_set() -> None:
    s = parse_scenario(dp_job(1024, rank_assignment="topology-aware"))
    assert s.cluster.rank_assignment == "topology-aware"
    assert scenario_to_dict(s)["cluster"]["rank_assignment"] == "topology-aware"
    assert parse_scenario(scenario_to_dict(s)).cluster == s.cluster
    plain = parse_scenario(dp_job(1024))
    assert plain.cluster.rank_assignment == "unaligned" and "rank_assignment" not in scenario_to_dict(plain)["cluster"]
    err = refusal(parse_scenario, dp_job(1024, rank_assignment="sorted"))
    assert err.field == "cluster.rank_assignment" and "topology-aware" in str(err)

