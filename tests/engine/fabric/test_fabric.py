"""Fabric sizing: textbook fat-tree counts, DeepSeek multi-plane, media and limits."""

from __future__ import annotations

import math

import pytest

from engine.catalog import CatalogError, default_catalog
from engine.fabric.sizing import size_fabric
from engine.fabric.tree import FabricSpec, leaf_split, size_tree, tree_capacity


def spec(gpus: int, **kw: object) -> FabricSpec:
    return FabricSpec(gpus=gpus, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [8, 40, 64, 128])
def test_textbook_capacities(k: int) -> None:
    assert tree_capacity(k, 1) == k
    assert tree_capacity(k, 2) == k * k // 2
    assert tree_capacity(k, 3) == k**3 // 4


@pytest.mark.parametrize("k", [8, 40, 64, 144])
def test_full_size_trees_have_textbook_switch_counts(k: int) -> None:
    two = size_tree(k * k // 2, k, 2)
    assert (two.leaf, two.spine, two.core) == (k, k // 2, 0)
    assert two.leaf + two.spine == 3 * k // 2
    three = size_tree(k**3 // 4, k, 3)
    assert (three.leaf, three.spine, three.core) == (k * k // 2, k * k // 2, k * k // 4)
    assert three.leaf + three.spine + three.core == 5 * k * k // 4
    # every tier carries the endpoint bandwidth when non-blocking
    assert three.node_leaf_links == three.leaf_spine_links == three.spine_core_links == k**3 // 4


def test_quantum2_two_tier_full_size_via_catalog() -> None:
    plan = size_fabric(spec(2048, tiers=2))  # 256 nodes x 8 NICs = 2048 endpoints = 64^2/2
    assert plan.switch_model == "QM9700"
    assert plan.radix == 64
    assert plan.switches == {"leaf": 64, "spine": 32, "core": 0, "total": 96}


def test_quantum2_three_tier_full_size_via_catalog() -> None:
    plan = size_fabric(spec(65536, tiers=3))
    assert plan.switches == {"leaf": 2048, "spine": 2048, "core": 1024, "total": 5120}
    assert plan.max_endpoints == 64**3 // 4


def test_reference_cluster_three_tier() -> None:
    plan = size_fabric(spec(16384))
    assert plan.tiers == 3  # 16,384 NICs > 2,048 = 64^2/2
    assert plan.switches == {"leaf": 512, "spine": 512, "core": 256, "total": 1280}
    assert plan.links == {"node_leaf": 16384, "leaf_spine": 16384, "spine_core": 16384}
    assert plan.ports_used == plan.ports_available  # non-blocking partial tree fills every port here


def test_two_tier_limit_message() -> None:
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(2056, tiers=2))
    assert exc.value.field == "cluster.gpus"
    assert "2-tier fat-tree of 64-port switches supports at most 2048 endpoints" in str(exc.value)


def test_three_tier_limit_message() -> None:
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(65544))
    assert exc.value.field == "cluster.gpus"
    assert "3-tier fat-tree of 64-port switches supports at most 65536 endpoints" in str(exc.value)


def test_deepseek_multi_plane_16k() -> None:
    plan = size_fabric(spec(16384, topology="multi-plane", tiers=2))
    assert plan.planes == 8
    # each plane: 2,048 NICs (one per node) on a full 2-tier fat-tree of 64-port switches: 64 leaves + 32 spines
    assert plan.switches == {"leaf": 8 * 64, "spine": 8 * 32, "core": 0, "total": 768}
    assert plan.max_gpus == 16384
    single = size_fabric(spec(16384))
    assert single.tiers == 3 and single.switches["total"] == 1280
    assert plan.switches["total"] / single.switches["total"] == pytest.approx(0.6)
    assert plan.links["leaf_spine"] == 16384 and plan.links["spine_core"] == 0


def test_deepseek_multi_plane_limit() -> None:
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(16392, topology="multi-plane", tiers=2))
    assert exc.value.field == "cluster.gpus"
    assert "at most 16384 GPUs" in str(exc.value)
    assert "2-tier multi-plane fat-tree of 64-port switches" in str(exc.value)


def test_oversubscription_changes_leaf_split() -> None:
    assert leaf_split(64, 1.0) == (32, 32)
    assert leaf_split(64, 3.0) == (48, 16)
    plan = size_fabric(spec(3072, tiers=2, oversubscription=3.0))
    assert plan.switches["leaf"] == 64  # 3072 / 48
    assert plan.switches["spine"] == 16  # 64 leaves x 16 up / 64 ports
    assert plan.max_endpoints == 64 * 48
    nb = size_fabric(spec(2048, tiers=2))
    assert plan.switches["total"] / plan.endpoints < nb.switches["total"] / nb.endpoints


def test_breakout_doubles_radix_for_ethernet_at_400g() -> None:
    plan = size_fabric(spec(16384, fabric="roce"))
    assert plan.switch_model == "SN5600"
    assert plan.radix == 128  # 64 x 800G cages broken out to 128 x 400G
    assert plan.switches == {"leaf": 256, "spine": 256, "core": 128, "total": 640}
    two = size_fabric(spec(8192, fabric="roce"))
    assert two.tiers == 2 and two.switches["total"] == 128 + 64


def test_rail_optimized_leaves_serve_one_rail() -> None:
    # 100 nodes: a plain fat-tree packs 800 NICs into 25 leaves; rails need 8 x ceil(100/32) = 32 leaves
    ft = size_fabric(spec(800))
    rail = size_fabric(spec(800, topology="rail-optimized"))
    assert ft.switches["leaf"] == 25
    assert rail.switches["leaf"] == 32
    assert rail.leaf_placement == "row"  # a rail leaf spans many racks: optics


def test_copper_in_rack_optics_beyond() -> None:
    plan = size_fabric(spec(16384))
    assert plan.leaf_placement == "rack"  # 4 nodes x 8 NICs = 32 = leaf down ports
    # NIC->leaf: one 800G-to-2x400G active copper splitter per switch cage
    assert plan.cables["ACC-800G-2x400G"] == 16384 // 2
    # leaf-spine multimode, spine-core single-mode, twin-port modules at both ends, one fibre per link
    assert plan.transceivers == {"XCVR-800G-2xSR4": 16384, "XCVR-800G-2xDR4": 16384}
    assert plan.cables["FIBRE-MPO"] == 2 * 16384
    row = size_fabric(spec(16384, leaf_placement="row"))
    assert row.transceivers["XCVR-400G-SR4"] == 16384  # NIC side
    assert row.transceivers["XCVR-800G-2xSR4"] == 16384 + 16384 // 2


def test_network_power_from_catalog() -> None:
    cat = default_catalog()
    plan = size_fabric(spec(16384))
    expected = (1280 * cat["QM9700"]["power_w"] + 16384 * cat["XCVR-800G-2xSR4"]["power_w"]
                + 16384 * cat["XCVR-800G-2xDR4"]["power_w"] + 8192 * cat["ACC-800G-2x400G"]["power_w"]) / 1000
    assert plan.network_power_kw == pytest.approx(expected)
    assert plan.nic_power_kw == pytest.approx(16384 * cat["CX7-400G"]["power_w"] / 1000)


def test_xdr_800g_uses_144_port_switch() -> None:
    plan = size_fabric(spec(16384, nic_gbps=800))
    assert plan.switch_model == "Q3400" and plan.radix == 144 and plan.tiers == 3
    # whole racks per leaf within copper reach: 2 racks of 4 eight-NIC nodes = 64 of the 72 non-blocking down ports
    leaves = math.ceil(2048 / 8)
    assert (plan.switches["leaf"], plan.leaf_down, plan.leaf_up, plan.leaf_placement) == (leaves, 64, 64, "rack")
    assert plan.switches["core"] == math.ceil(leaves * 64 / 144)
    assert tree_capacity(144, 2) == 10368  # why 16,384 GPUs still need three tiers


def test_errors_name_fields() -> None:
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(1024, switch="QM9700", fabric="roce"))
    assert exc.value.field == "cluster.switch"
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(1024, switch="QM9700", nic="CX8-800G", nic_gbps=800))
    assert exc.value.field == "cluster.nic_gbps"
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(1024, switch="NOPE"))
    assert exc.value.field == "cluster.switch"
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(1024, topology="torus"))
    assert exc.value.field == "cluster.topology"
    with pytest.raises(CatalogError) as exc:
        size_fabric(spec(1024, topology="multi-plane", planes=3))
    assert exc.value.field == "costs.planes"


def test_custom_catalog_radix_is_used() -> None:
    cat = default_catalog()
    cat["QM9700"]["specs"]["breakout"] = {"400": 32}
    plan = size_fabric(spec(512, tiers=2), cat)  # 32-port: 2-tier holds 32^2/2 = 512
    assert plan.radix == 32 and plan.switches["total"] == 48
