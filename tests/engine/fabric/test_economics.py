"""Fabric economics that hold (issue #24 item 1): thinning a tier never costs more, and 2:1 saves real money.

Network capex here is the TCO's network line items (switches, transceivers and cables at catalog prices; the
install share multiplies them all and the front-end network is a constant, so neither changes a comparison):
``test_network_capex_is_the_tco_network_line`` checks that against ``tco`` itself.
"""

from __future__ import annotations

import copy
import math

import pytest

from engine.catalog import CatalogError, get_item
from engine.cost.tco import tco
from engine.document.parse import parse_scenario
from engine.fabric.sizing import FabricPlan, size_fabric
from engine.fabric.tree import FabricSpec
from engine.flowsim.network import network_for
from tests.engine.fabric.test_topology import dp_job

TOPOLOGIES = ("fat-tree", "rail-optimized", "multi-plane")
FABRICS = ("infiniband", "roce")
SPEEDS = (200, 400, 800)
SIZES = (256, 1024, 2048, 4096, 16384, 65536)


def network_capex(plan: FabricPlan) -> float:
    usd = plan.switches["total"] * float(plan.switch_item["unit_price_usd"])
    for kind, bucket in (("transceiver", plan.transceivers), ("cable", plan.cables)):
        usd += sum(q * float(get_item(key, kind, "cluster.switch")["unit_price_usd"]) for key, q in bucket.items())
    return usd


def sized(gpus: int, topology: str, fabric: str, gbps: int, r: float, pod: int | None = None) -> FabricPlan | None:
    try:
        return size_fabric(FabricSpec(gpus=gpus, topology=topology, fabric=fabric, nic_gbps=gbps,
                                      oversubscription=r, pod_gpus=pod))
    except CatalogError:
        return None


CASES = [(t, f, g, n) for t in TOPOLOGIES for f in FABRICS for g in SPEEDS for n in SIZES]


@pytest.mark.parametrize(("topology", "fabric", "gbps", "gpus"), CASES)
def test_thinning_never_costs_more_and_two_to_one_saves(topology: str, fabric: str, gbps: int, gpus: int) -> None:
    one = sized(gpus, topology, fabric, gbps, 1.0)
    if one is None:  # unbuildable non-blocking: thinner trees may fit, nothing to compare against
        return
    prev = one
    for r in (1.5, 2.0, 3.0, 4.0):
        for pod in (None, 256, 2048):
            thin = sized(gpus, topology, fabric, gbps, r, pod)
            assert thin is not None, (r, pod)
            assert thin.tiers <= one.tiers, (r, pod)
            assert thin.switches["total"] <= one.switches["total"], (r, pod, thin.switches, one.switches)
            assert thin.transceiver_count <= one.transceiver_count, (r, pod)
            assert network_capex(thin) <= network_capex(one) * (1 + 1e-9), (r, pod)
        leaf = sized(gpus, topology, fabric, gbps, r)
        assert leaf is not None
        # and more thinning at the leaf never costs more than less thinning
        assert leaf.switches["total"] <= prev.switches["total"] and leaf.transceiver_count <= prev.transceiver_count
        assert network_capex(leaf) <= network_capex(prev) * (1 + 1e-9), r
        prev = leaf
    two = sized(gpus, topology, fabric, gbps, 2.0)
    assert two is not None
    # an uplink tier to thin: 2:1 at the leaf saves at least 15% of the network capex. Exempt: a tier above the
    # leaves that is one switch per plane (a 256-GPU rail-optimized job on 256-port leaves: 8 leaves, 1 spine):
    # no spine can go, only optics, which is 9% there.
    if one.tiers > 1 and one.switches["spine"] > one.planes:
        assert network_capex(two) <= 0.85 * network_capex(one), (network_capex(two), network_capex(one))
        assert two.links["leaf_spine"] <= 0.6 * one.links["leaf_spine"]


@pytest.mark.parametrize(("topology", "fabric", "gbps", "gpus"), CASES)
def test_leaves_hold_whole_nodes_and_racks(topology: str, fabric: str, gbps: int, gpus: int) -> None:
    for r in (1.0, 2.0):
        plan = sized(gpus, topology, fabric, gbps, r)
        if plan is None or plan.tiers == 1:
            continue
        per_node = plan.spec.nics_per_node // (plan.planes * plan.rails)
        assert plan.leaf_down % per_node == 0  # whole nodes
        nodes = plan.leaf_down // per_node
        npr = plan.spec.nodes_per_rack
        # whole racks, or a rack split evenly: no spanning leaf, unless whole racks do not fit the fewest tiers
        # (40-port QM8700 trees near their limit)
        assert nodes % npr == 0 or npr % nodes == 0 or plan.endpoints > plan.max_endpoints // 2, (nodes, npr)
        assert plan.leaf_up == math.ceil(plan.leaf_down / r)  # uplinks in proportion
        assert plan.leaf_down + plan.leaf_up <= plan.radix


def test_the_issue_2048_h100_roce_example() -> None:
    """Llama 3 70B on 2,048 H100 at 400G RoCE: 48 switches at 1:1; 2:1 (at the leaf, or with a 256-GPU pod)
    keeps 2 tiers, 2-rack copper leaves, and halves the spines and leaf-spine optics."""
    one = sized(2048, "fat-tree", "roce", 400, 1.0)
    leaf = sized(2048, "fat-tree", "roce", 400, 2.0)
    pod = sized(2048, "fat-tree", "roce", 400, 2.0, 256)
    assert one is not None and leaf is not None and pod is not None
    assert (one.tiers, one.switches["total"]) == (2, 48)
    for thin in (leaf, pod):
        assert (thin.tiers, thin.switches, thin.leaf_placement) == (
            2, {"leaf": 32, "spine": 8, "core": 0, "total": 40}, "rack")
        assert thin.links["leaf_spine"] == one.links["leaf_spine"] // 2
        assert network_capex(thin) <= 0.75 * network_capex(one)


def test_a_pod_never_adds_a_tier_and_wide_pods_are_clamped() -> None:
    flat = sized(2048, "fat-tree", "infiniband", 400, 1.0)
    for pod in (64, 256, 1024):
        plan = sized(2048, "fat-tree", "infiniband", 400, 2.0, pod)
        assert plan is not None and flat is not None and plan.tiers == flat.tiers == 2
    big = sized(65536, "fat-tree", "infiniband", 400, 2.0, 32768)  # wider than k/2 leaves: the full pod
    assert big is not None and big.tiers == 3 and big.pod_leaves == 32


@pytest.mark.parametrize("doc", [
    dp_job(2048, fabric="roce", oversubscription=2.0, pod_gpus=256),
    dp_job(16384, oversubscription=2.0, pod_gpus=512),
    dp_job(65536 // 4, fabric="roce", oversubscription=4.0, pod_gpus=256, nic_gbps=800),
    dp_job(4096, fabric="roce", nic_gbps=800),
], ids=["2048-roce-pod256", "16k-pod512", "16k-roce800-pod256", "4096-roce800"])
def test_fabric_study_and_tco_describe_the_same_switches(doc: dict) -> None:
    t = parse_scenario(copy.deepcopy(doc)).topo
    net = network_for(t, 900.0).summary()
    assert (net["leaves"], net["spines"], net["cores"]) == (
        t.switches["leaf"], t.switches["spine"], t.switches["core"])


def test_network_capex_is_the_tco_network_line() -> None:
    doc = dp_job(1024, fabric="roce", oversubscription=2.0)
    out = tco(copy.deepcopy(doc))
    plan = parse_scenario(doc).topo.plan
    assert isinstance(plan, FabricPlan)
    hw = sum(li["total_usd"] for li in out["tco"]["line_items"]
             if li["category"] == "network" and li["basis"] == "capex" and not li["item"].startswith(
                 ("Installation", "Front-end")))
    assert hw == pytest.approx(network_capex(plan))
