"""Compute-fabric sizing: switches per tier, ports, transceivers, cables and network power.

Pure Python (no Django). The model is the textbook folded Clos / k-ary fat-tree:

* a switch of radix ``k`` (ports at the link speed, after breakout) used as a leaf gives ``d`` ports down to
  endpoints (NICs) and ``u = k - d`` up; non-blocking means ``d = u = k/2``; an oversubscription ``r`` (down:up)
  gives ``d = round(k * r / (r + 1))``;
* 1 tier: one switch, at most ``k`` endpoints;
* 2 tiers: ``L = ceil(E/d)`` leaves, ``S = ceil(L*u/k)`` spines, at most ``k*d`` endpoints (``k^2/2`` non-blocking,
  ``k`` leaves + ``k/2`` spines at full size);
* 3 tiers: pods of ``k/2`` leaves and ``u`` spines, at most ``k`` pods, so at most ``k*(k/2)*d`` endpoints
  (``k^3/4`` non-blocking; ``k^2/2`` leaves, ``k^2/2`` spines and ``k^2/4`` cores = ``5k^2/4`` switches at full size).

Topologies: ``fat-tree`` (leaves take any NICs), ``rail-optimized`` (a leaf only takes NICs of one rail, i.e. one
NIC index across nodes, as in DGX SuperPOD), ``multi-plane`` (``planes`` independent fat-trees, plane ``p`` takes NIC
``p`` of every node, as in DeepSeek-V3's 8-plane 2-tier network).

Media: copper (DAC/ACC) from the NICs to a leaf in the same rack (or the next one), optics beyond. Optical links
use the switch's cage optics at both switch ends (twin-port modules terminate 2 links) and a single-port module
at the NIC, plus one fibre cable per link; the top tier uses single-mode DR optics, lower tiers multimode SR.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from engine.catalog import CatalogItem, CatalogItems, get_item
from engine.fabric.parts import (  # FabricError and switch_radix are public here too
    FabricError,
    _pick_copper,
    _pick_fibre,
    _pick_transceiver,
    _specs,
    switch_radix,
)
from engine.fabric.tree import (
    COPPER_MAX_RACKS,
    FabricSpec,
    LeafLayout,
    leaf_layout,
    max_gpus_served,
    size_tree_leaves,
)
from engine.schema.types import FABRICS, LEAF_PLACEMENTS, TOPOLOGIES, ScenarioSpec

# Default switch per fabric and NIC speed; default NIC per speed.
DEFAULT_SWITCH = {
    ("infiniband", 200): "QM8700",
    ("infiniband", 400): "QM9700",
    ("infiniband", 800): "Q3400",
    ("roce", 200): "SN5600",
    ("roce", 400): "SN5600",
    ("roce", 800): "SN5600",
}
DEFAULT_NIC = {200: "CX6-200G", 400: "CX7-400G", 800: "CX8-800G"}
DEFAULT_SERVER_FOR_GPU = {
    "A100-40GB": "HGX-A100-40GB",
    "A100-80GB": "HGX-A100-80GB",
    "H100-SXM": "HGX-H100",
    "H800": "HGX-H800",
    "H200": "HGX-H200",
    "B200": "HGX-B200",
    "B300": "HGX-B300",
    "GB200": "GB200-NVL72",
    "GB300": "GB300-NVL72",
}
@dataclass
class FabricPlan:
    spec: FabricSpec
    switch_model: str
    switch_item: CatalogItem
    nic_model: str
    nic_item: CatalogItem
    radix: int  # ports per switch at the link speed
    link_gbps: float
    tiers: int
    planes: int
    leaf_placement: str  # resolved: rack | row
    endpoints: int
    max_endpoints: int
    max_gpus: int
    switches: dict[str, int]
    links: dict[str, int]
    ports_used: int
    ports_available: int
    nics: int
    leaf_down: int = 0  # leaf ports facing NICs (after the oversubscription split)
    leaf_up: int = 0  # leaf ports facing spines
    rails: int = 1  # leaf groups per plane (rail-optimized: one per NIC index)
    pod_leaves: int = 0  # leaves per pod of a 3-tier tree (k/2 at full size; fewer for smaller requested pods)
    transceivers: dict[str, int] = field(default_factory=dict)
    cables: dict[str, int] = field(default_factory=dict)
    power_w: dict[str, float] = field(default_factory=dict)

    @property
    def network_power_kw(self) -> float:
        """Switches, optics and active cables; the compute NICs draw from (and are counted in) the servers."""
        return sum(v for k, v in self.power_w.items() if k != "nics") / 1000.0

    @property
    def nic_power_kw(self) -> float:
        return self.power_w.get("nics", 0.0) / 1000.0

    @property
    def transceiver_count(self) -> int:
        return sum(self.transceivers.values())

    @property
    def cable_count(self) -> int:
        return sum(self.cables.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "switch_model": self.switch_model,
            "nic_model": self.nic_model,
            "fabric": self.spec.fabric,
            "topology": self.spec.topology,
            "tiers": self.tiers,
            "planes": self.planes,
            "radix": self.radix,
            "link_gbps": self.link_gbps,
            "oversubscription": self.spec.oversubscription,
            "leaf_placement": self.leaf_placement,
            "endpoints": self.endpoints,
            "max_endpoints": self.max_endpoints,
            "max_gpus": self.max_gpus,
            "switches": dict(self.switches),
            "links": dict(self.links),
            "ports_used": self.ports_used,
            "ports_available": self.ports_available,
            "nics": self.nics,
            "transceivers": dict(self.transceivers),
            "cables": dict(self.cables),
            "power_kw": {k: v / 1000.0 for k, v in self.power_w.items()},
            "network_power_kw": self.network_power_kw,
            "nic_power_kw": self.nic_power_kw,
        }


# --------------------------------------------------------------------------------------------- pure sizing


def default_switch_key(fabric: str, nic_gbps: float) -> str:
    speed = 200 if nic_gbps <= 200 else 400 if nic_gbps <= 400 else 800
    return DEFAULT_SWITCH[(fabric, speed)]


def default_nic_key(nic_gbps: float) -> str:
    speed = 200 if nic_gbps <= 200 else 400 if nic_gbps <= 400 else 800
    return DEFAULT_NIC[speed]


# --------------------------------------------------------------------------------------------- plan


def _topology_name(spec: FabricSpec, tiers: int, k: int) -> str:
    names = {"fat-tree": "fat-tree", "rail-optimized": "rail-optimized fat-tree", "multi-plane": "multi-plane fat-tree"}
    return f"{tiers}-tier {names[spec.topology]} of {k}-port switches"


def size_fabric(spec: FabricSpec, catalog: CatalogItems | None = None) -> FabricPlan:
    """Size the compute fabric for ``spec``; raise :class:`FabricError` naming the field when impossible."""
    if spec.topology not in TOPOLOGIES:
        raise FabricError("cluster.topology", f"must be one of {', '.join(TOPOLOGIES)}, got {spec.topology!r}")
    if spec.fabric not in FABRICS:
        raise FabricError("cluster.fabric", f"must be one of {', '.join(FABRICS)}, got {spec.fabric!r}")
    if spec.leaf_placement not in LEAF_PLACEMENTS:
        raise FabricError("costs.leaf_placement", f"must be one of {', '.join(LEAF_PLACEMENTS)}, got {spec.leaf_placement!r}")
    if spec.gpus < 1 or spec.gpus_per_node < 1 or spec.nics_per_node < 1:
        raise FabricError("cluster.gpus", "GPU, GPU-per-node and NIC-per-node counts must be positive")
    if spec.oversubscription < 1.0:
        raise FabricError("cluster.oversubscription", f"must be >= 1.0, got {spec.oversubscription:g}")

    switch_key = spec.switch or default_switch_key(spec.fabric, spec.nic_gbps)
    nic_key = spec.nic or default_nic_key(spec.nic_gbps)
    switch = get_item(switch_key, "switch", "cluster.switch", catalog)
    nic = get_item(nic_key, "nic", "cluster.nic", catalog)
    sw_specs = _specs(switch)
    nic_specs = _specs(nic)
    if sw_specs.get("fabric") != spec.fabric:
        raise FabricError("cluster.switch", f"{switch_key} is a {sw_specs.get('fabric')} switch but cluster.fabric is {spec.fabric}")
    nic_fabrics = nic_specs.get("fabrics") or [spec.fabric]
    if spec.fabric not in nic_fabrics:
        raise FabricError("cluster.nic", f"{nic_key} does not support {spec.fabric}")
    nic_gbps_cap = float(nic_specs.get("gbps", spec.nic_gbps))
    if spec.nic_gbps > nic_gbps_cap:
        raise FabricError("cluster.nic_gbps", f"{spec.nic_gbps:g} Gb/s exceeds NIC {nic_key} ({nic_gbps_cap:g} Gb/s)")

    k, port_gbps = switch_radix(switch, spec.nic_gbps)
    link_gbps = port_gbps  # links, optics and cables run at a standard port speed >= the NIC rate
    nodes = spec.nodes
    if spec.topology == "multi-plane":
        planes = spec.planes or spec.nics_per_node
        if planes < 1 or spec.nics_per_node % planes:
            raise FabricError("costs.planes", f"{planes} planes must divide cluster.nics_per_node={spec.nics_per_node}")
    else:
        if spec.planes not in (None, 1):
            raise FabricError("costs.planes", "planes > 1 needs cluster.topology = multi-plane")
        planes = 1
    epn = max(1, spec.nics_per_node // planes) if spec.topology == "fat-tree" else 1  # NICs of a node per leaf
    groups = spec.nics_per_node // planes if spec.topology != "fat-tree" else 1
    # a partial last node (a rack-scale system with fewer GPUs used than it holds) cables the NICs of its GPUs only
    unit = planes * groups
    rem = spec.gpus - (nodes - 1) * spec.gpus_per_node
    last_node_nics = min(spec.nics_per_node,
                         math.ceil(math.ceil(rem * spec.nics_per_node / spec.gpus_per_node) / unit) * unit)
    total_nics = (nodes - 1) * spec.nics_per_node + last_node_nics
    endpoints_per_plane = total_nics // planes
    npr = max(1, spec.nodes_per_rack)
    pod_design = spec.pod_gpus is not None and spec.oversubscription > 1.0 and spec.pod_gpus < spec.gpus

    def layout(r: float, mode: str) -> LeafLayout:
        return leaf_layout(k, epn, r, npr, nodes, last_node_nics // planes // groups or 1, mode,
                            copper=spec.topology == "fat-tree")

    # leaf layouts, cheapest media first: whole racks within copper reach, whole racks, whole nodes (rack-spanning
    # leaves only where nothing else fits the tiers, or where costs.leaf_placement = row asks for a network row)
    if spec.leaf_placement == "row":
        modes: tuple[str, ...] = ("nodes",)
    elif spec.topology == "fat-tree":
        modes = ("copper", "racks", "nodes")
    else:
        modes = ("racks", "nodes")

    def fits(t: int, lv: LeafLayout) -> bool:
        if t == 1:
            return groups == 1 and endpoints_per_plane <= k
        return groups * lv.leaves <= (k if t == 2 else k * (k // 2))

    def choose(r: float, allowed: tuple[int, ...]) -> tuple[int, LeafLayout] | None:
        """Fewest tiers (of ``allowed``) that fit, with the first leaf layout (cheapest media) that fits them."""
        for t in allowed:
            for mode in modes:
                lv = layout(r, mode)
                if fits(t, lv):
                    return t, lv
        return None

    oversub_leaf, oversub_top = spec.oversubscription, 1.0
    if spec.pod_gpus is not None and spec.pod_gpus >= spec.gpus:
        oversub_leaf = 1.0  # a non-blocking pod of the whole cluster: nothing above it to thin
    tier_options = (spec.tiers,) if spec.tiers is not None else (1, 2, 3)
    if spec.tiers is not None and spec.tiers not in (1, 2, 3):
        raise FabricError("cluster.tiers", f"must be 1, 2 or 3, got {spec.tiers}")
    chosen = choose(oversub_leaf, tuple(t for t in tier_options if t <= 2) if pod_design else tier_options)
    pod_leaves: int | None = None
    if pod_design and chosen is None:
        # non-blocking pods under a thinned core: 3 tiers, pods of whole leaves, at most k/2 leaves (the largest
        # block a spine layer serves; a wider cluster.pod_gpus is clamped to it)
        oversub_leaf, oversub_top = 1.0, spec.oversubscription
        chosen = choose(1.0, (3,) if 3 in tier_options else ())
        if chosen is not None:
            lv = chosen[1]
            pod_nodes = math.ceil(spec.pod_gpus / spec.gpus_per_node) if spec.pod_gpus else nodes
            per_rail = max(1, math.ceil(pod_nodes / lv.nodes_per_leaf)) if lv.nodes_per_leaf >= 1 else \
                pod_nodes * lv.leaves_per_node
            pod_leaves = min(k // 2, groups * per_rail)
    if chosen is None:
        tiers = tier_options[-1]
        lv = layout(oversub_leaf, modes[-1])
        cap_leaves = k if tiers == 2 else k * (k // 2) if tiers == 3 else 0
        max_endpoints = (cap_leaves * lv.down if tiers > 1 else (k if groups == 1 else 0)) * planes
        max_gpus = max_gpus_served(lv, cap_leaves, tiers, k, spec, planes, groups)
        what = _topology_name(spec, tiers, k)
        bigger = None
        if spec.tiers is not None:
            bigger = next((t for t in range(tiers + 1, 4) if any(fits(t, layout(oversub_leaf, m)) for m in modes)),
                          None)
        hint = f" (cluster.tiers={tiers}: a {bigger}-tier tree would fit)" if bigger else ""
        if planes > 1:
            raise FabricError(
                "cluster.gpus",
                f"{planes}-plane network of {what}s supports at most {max_gpus} GPUs "
                f"({max_endpoints // planes} endpoints per plane); asked for {spec.gpus}{hint}",
            )
        raise FabricError(
            "cluster.gpus",
            f"{what} supports at most {max_endpoints} endpoints ({max_gpus} GPUs at "
            f"{spec.nics_per_node} NICs per {spec.gpus_per_node}-GPU node); asked for {total_nics}{hint}",
        )
    tiers, lv = chosen
    cap_leaves = k if tiers == 2 else k * (k // 2) if tiers == 3 else 0
    max_endpoints = (cap_leaves * lv.down if tiers > 1 else k) * planes
    max_gpus = max_gpus_served(lv, cap_leaves, tiers, k, spec, planes, groups)

    tree = size_tree_leaves(endpoints_per_plane, k, tiers, groups * lv.leaves if tiers > 1 else 1, lv.up,
                             oversub_top, pod_leaves, max_endpoints // planes)
    leaf, spine, core = tree.leaf * planes, tree.spine * planes, tree.core * planes
    nl, ls, sc = tree.node_leaf_links * planes, tree.leaf_spine_links * planes, tree.spine_core_links * planes

    # leaf placement: in the rack (copper) when one leaf's downlinks come from at most COPPER_MAX_RACKS racks
    down = lv.down if tiers > 1 else k
    placement = spec.leaf_placement
    if placement == "auto":
        placement = "rack" if (spec.topology == "fat-tree" and lv.racks <= COPPER_MAX_RACKS) else "row"

    cage_gbps = float(sw_specs.get("cage_gbps", port_gbps))
    transceivers: dict[str, int] = {}
    cables: dict[str, int] = {}
    items: dict[str, CatalogItem] = {}

    def add(bucket: dict[str, int], item: CatalogItem, qty: int) -> None:
        if qty <= 0:
            return
        bucket[item["key"]] = bucket.get(item["key"], 0) + qty
        items[item["key"]] = item

    fibre = _pick_fibre(catalog, "cluster.switch")
    per_cage = max(1, int(cage_gbps // link_gbps))

    def optical_tier(links: int, reach: str) -> None:
        xcvr = _pick_transceiver(catalog, cage_gbps, link_gbps, reach, nic_side=False, field_name="cluster.switch")
        add(transceivers, xcvr, 2 * math.ceil(links / per_cage))
        add(cables, fibre, links)

    # NIC to leaf
    if tiers >= 1:
        if placement == "rack":
            cable, per = _pick_copper(catalog, cage_gbps, link_gbps, "cluster.nic_gbps")
            add(cables, cable, math.ceil(nl / per))
        else:
            reach = "sr"
            nic_x = _pick_transceiver(catalog, float(nic_specs.get("gbps", link_gbps)), link_gbps, reach, True,
                                      "cluster.nic")
            sw_x = _pick_transceiver(catalog, cage_gbps, link_gbps, reach, False, "cluster.switch")
            add(transceivers, nic_x, nl)
            add(transceivers, sw_x, math.ceil(nl / per_cage))
            add(cables, fibre, nl)
    if tiers == 2:
        optical_tier(ls, "dr")
    if tiers == 3:
        optical_tier(ls, "sr")
        optical_tier(sc, "dr")

    n_switches = leaf + spine + core
    power_w = {
        "switches": n_switches * float(switch.get("power_w") or 0.0),
        "transceivers": sum(q * float(items[key].get("power_w") or 0.0) for key, q in transceivers.items()),
        "cables": sum(q * float(items[key].get("power_w") or 0.0) for key, q in cables.items()),
        "nics": total_nics * float(nic.get("power_w") or 0.0),
    }
    ports_used = nl + 2 * ls + 2 * sc
    return FabricPlan(
        spec=spec,
        switch_model=switch_key,
        switch_item=switch,
        nic_model=nic_key,
        nic_item=nic,
        radix=k,
        link_gbps=link_gbps,
        tiers=tiers,
        planes=planes,
        leaf_placement=placement,
        endpoints=total_nics,
        max_endpoints=max_endpoints,
        max_gpus=max_gpus,
        switches={"leaf": leaf, "spine": spine, "core": core, "total": n_switches},
        links={"node_leaf": nl, "leaf_spine": ls, "spine_core": sc},
        ports_used=ports_used,
        ports_available=n_switches * k,
        nics=total_nics,
        leaf_down=down,
        leaf_up=lv.up if tiers > 1 else 0,
        rails=groups,
        pod_leaves=min(k // 2, pod_leaves or k // 2) if tiers == 3 else 0,
        transceivers=transceivers,
        cables=cables,
        power_w=power_w,
    )


# --------------------------------------------------------------------------------------------- from a scenario


def fabric_spec(s: ScenarioSpec) -> FabricSpec:
    """The sizing inputs of a parsed scenario (no second reading of the document).

    A node here is what the job uses of one: with ``cluster.gpus_per_rack`` (64 of an NVL72's 72) the fabric
    sees racks of that many GPUs and their NICs (:attr:`ClusterSpec.nics_used_per_node`), so it spans
    ceil(gpus / gpus_per_rack) racks and cables only the used GPUs' NICs; the spares hang off no leaf."""
    c, f = s.cluster, s.fabric
    return FabricSpec(
        gpus=c.gpus,
        gpus_per_node=c.gpus_used_per_node,
        nics_per_node=c.nics_used_per_node,
        nic_gbps=c.nic_gbps,
        fabric=c.fabric,
        topology=c.topology,
        tiers=c.tiers if c.tiers_given else None,
        oversubscription=c.oversubscription,
        pod_gpus=c.pod_gpus if c.pod_given else None,
        planes=f.planes if f is not None else None,
        switch=c.switch,
        nic=c.nic,
        nodes_per_rack=f.nodes_per_rack if f is not None else 4,
        leaf_placement=f.leaf_placement if f is not None else "auto",
    )


def plan_for(s: ScenarioSpec, catalog: CatalogItems | None = None) -> FabricPlan:
    """The full fabric plan (switches, optics, cables, power) of a parsed scenario."""
    spec = fabric_spec(s)
    return _default_plan(spec) if catalog is None else size_fabric(spec, catalog)


@lru_cache(maxsize=256)
def _default_plan(spec: FabricSpec) -> FabricPlan:
    """Plans on the default catalog, memoised by their (frozen) inputs: the Monte Carlo and sensitivity re-size
    the same fabric for every performance point. Callers treat a plan as read-only."""
    return size_fabric(spec, None)
