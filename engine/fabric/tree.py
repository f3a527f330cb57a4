"""The folded-Clos tree of one fabric: how many leaves, spines and cores a number of endpoints needs at a switch
radix, tier count and oversubscription, and how whole nodes and racks fill the leaves (issue #24: leaves hold
whole nodes, oversubscription thins uplinks in proportion, the fewest tiers that fit). Pure arithmetic: the
catalog parts (optics, cables, power) are priced by :mod:`engine.fabric.sizing`, which calls this."""

from __future__ import annotations

import math
from dataclasses import dataclass

# The leaf may sit in the rack (copper) when its down ports are filled from at most this many adjacent racks
# (active copper reaches 3-5 m, i.e. the neighbouring rack).
COPPER_MAX_RACKS = 2


@dataclass(frozen=True)
class FabricSpec:
    """Inputs of the sizing (all resolved: no "auto")."""

    gpus: int
    gpus_per_node: int = 8
    nics_per_node: int = 8
    nic_gbps: float = 400.0
    fabric: str = "infiniband"
    topology: str = "fat-tree"
    tiers: int | None = None  # None = smallest that fits
    oversubscription: float = 1.0
    pod_gpus: int | None = None  # non-blocking pod; oversubscription applies above it when < gpus
    planes: int | None = None  # multi-plane only; default nics_per_node
    switch: str | None = None  # catalog key; default by fabric and speed
    nic: str | None = None  # catalog key; default by speed
    nodes_per_rack: int = 4
    leaf_placement: str = "auto"

    @property
    def nodes(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_node)


@dataclass(frozen=True)
class TreeCounts:
    tiers: int
    endpoints: int
    leaf: int
    spine: int
    core: int
    node_leaf_links: int
    leaf_spine_links: int
    spine_core_links: int
    max_endpoints: int


def leaf_split(k: int, oversubscription: float) -> tuple[int, int]:
    """(down, up) ports of a leaf of radix ``k`` at ``oversubscription`` (down:up)."""
    down = round(k * oversubscription / (oversubscription + 1.0))
    down = min(max(down, 1), k - 1) if k > 1 else 1
    return down, k - down


def tree_capacity(k: int, tiers: int, oversubscription: float = 1.0) -> int:
    """Largest endpoint count a ``tiers``-tier fat-tree of radix-``k`` switches can serve."""
    down, _ = leaf_split(k, oversubscription)
    if tiers == 1:
        return k
    if tiers == 2:
        return k * down
    if tiers == 3:
        return k * (k // 2) * down
    raise ValueError(f"tiers must be 1, 2 or 3, got {tiers}")


def size_tree(endpoints: int, k: int, tiers: int, oversubscription: float = 1.0,
              top_oversubscription: float = 1.0, leaf_groups: int = 1, pod_leaves: int | None = None) -> TreeCounts:
    """Switch and link counts of one fat-tree.

    ``oversubscription`` applies at the leaves; ``top_oversubscription`` thins the top tier (spine-core links and
    cores, or leaf-spine links and spines in a 2-tier tree) for designs that are non-blocking inside pods only.
    ``leaf_groups`` > 1 means leaves only take endpoints of one group (rails): ``endpoints`` is split evenly.
    ``pod_leaves``: leaves per pod of a 3-tier tree (default and at most ``k/2``, the full-size pod).
    The caller checks capacity first.
    """
    if endpoints <= 0:
        raise ValueError("endpoints must be positive")
    if tiers == 1:
        return TreeCounts(1, endpoints, 1, 0, 0, endpoints, 0, 0, k)
    down, up = leaf_split(k, oversubscription)
    per_group = math.ceil(endpoints / leaf_groups)
    leaves = leaf_groups * math.ceil(per_group / down)
    leaf_up_links = leaves * up
    cap = tree_capacity(k, tiers, oversubscription)
    if tiers == 2:
        ls_links = math.ceil(leaf_up_links / top_oversubscription)
        spines = math.ceil(ls_links / k)
        return TreeCounts(2, endpoints, leaves, spines, 0, endpoints, ls_links, 0, cap)
    # 3 tiers: pods of k/2 leaves (or pod_leaves); a pod with l leaves needs ceil(l*up/(k/2)) spines
    half = k // 2
    pod = min(half, pod_leaves) if pod_leaves else half
    full_pods, rest = divmod(leaves, pod)
    spines = full_pods * math.ceil(pod * up / half) + (math.ceil(rest * up / half) if rest else 0)
    sc_links = math.ceil(leaf_up_links / top_oversubscription)
    cores = math.ceil(sc_links / k)
    return TreeCounts(3, endpoints, leaves, spines, cores, endpoints, leaf_up_links, sc_links, cap)


@dataclass(frozen=True)
class LeafLayout:
    """How one plane-and-rail's nodes sit on its leaves: whole nodes per leaf, or a node over several leaves."""

    nodes_per_leaf: int  # whole nodes per leaf; 0 when a node needs several leaves
    leaves_per_node: int  # 1, or the leaves one node's NICs fill (a 72-NIC rack on 64-port leaves: 3)
    leaves: int  # per plane and rail
    down: int  # NIC ports cabled per leaf
    up: int  # uplinks cabled per leaf: ceil(down / oversubscription)
    racks: int  # racks one leaf's NICs come from


def max_leaf_down(k: int, oversubscription: float) -> int:
    """Most NIC ports a radix-``k`` leaf takes with ``ceil(down / oversubscription)`` uplinks left for them."""
    if k < 2:
        return 1
    d = max(1, min(k - 1, math.floor(k * oversubscription / (oversubscription + 1.0))))
    while d + 1 < k and d + 1 + math.ceil((d + 1) / oversubscription) <= k:
        d += 1
    while d > 1 and d + math.ceil(d / oversubscription) > k:
        d -= 1
    return d


def leaf_layout(k: int, epn: int, r: float, npr: int, nodes: int, last_eps: int, mode: str,
                 copper: bool) -> LeafLayout:
    """Leaves of whole nodes (``mode`` "nodes"), of whole racks or whole divisions of a rack ("racks"), and of at
    most :data:`COPPER_MAX_RACKS` racks ("copper", fat-tree leaves in the rack)."""
    d_max = max_leaf_down(k, r)
    if epn > d_max:  # one node's NICs fill several leaves (an NVL72 rack's 72 NICs on 64-port leaves)
        m = math.ceil(epn / d_max)
        down = math.ceil(epn / m)
        leaves = (nodes - 1) * m + math.ceil(last_eps / down)
        return LeafLayout(0, m, leaves, down, math.ceil(down / r), 1)
    n = d_max // epn
    if mode in ("racks", "copper"):
        if n >= npr:
            n = n // npr * npr
            # in the rack (copper) unless that leaves a leaf less than half of its non-blocking down ports (the
            # test does not depend on the oversubscription, so thinning a tier never moves leaves to optics)
            near = COPPER_MAX_RACKS * npr
            if mode == "copper" and copper and near * epn * 2 >= max_leaf_down(k, 1.0):
                n = min(n, near)
        else:  # a rack over several leaves: split it evenly, no leaf straddles two racks
            n = max(div for div in range(1, n + 1) if npr % div == 0)
    n = max(1, min(n, nodes))
    # balance: the leaves this takes share the nodes evenly (whole racks where aligned), so each leaf cables only
    # the uplinks its own NICs need
    step = npr if mode in ("racks", "copper") and n >= npr else 1
    n = min(n, math.ceil(math.ceil(nodes / math.ceil(nodes / n)) / step) * step)
    down = n * epn
    racks = math.ceil(n / npr) + (0 if n % npr == 0 or npr % n == 0 else 1)
    return LeafLayout(n, 1, math.ceil(nodes / n), down, math.ceil(down / r), racks)


def max_gpus_served(lv: LeafLayout, cap_leaves: int, tiers: int, k: int, spec: FabricSpec, planes: int, groups: int) -> int:
    if tiers == 1:
        return (k * planes // spec.nics_per_node) * spec.gpus_per_node if groups == 1 else 0
    per_group = cap_leaves // groups
    nodes = per_group * lv.nodes_per_leaf if lv.nodes_per_leaf else per_group // lv.leaves_per_node
    return nodes * spec.gpus_per_node


def size_tree_leaves(endpoints: int, k: int, tiers: int, leaves: int, up: int, top_oversubscription: float,
                      pod_leaves: int | None, cap: int) -> TreeCounts:
    """Switch and link counts of one plane whose ``leaves`` each cable ``up`` uplinks (see :func:`size_tree`)."""
    if tiers == 1:
        return TreeCounts(1, endpoints, 1, 0, 0, endpoints, 0, 0, k)
    leaf_up_links = leaves * up
    if tiers == 2:
        ls_links = math.ceil(leaf_up_links / top_oversubscription)
        return TreeCounts(2, endpoints, leaves, math.ceil(ls_links / k), 0, endpoints, ls_links, 0, cap)
    half = k // 2
    pod = min(half, pod_leaves) if pod_leaves else half
    full_pods, rest = divmod(leaves, pod)
    spines = full_pods * math.ceil(pod * up / half) + (math.ceil(rest * up / half) if rest else 0)
    sc_links = math.ceil(leaf_up_links / top_oversubscription)
    return TreeCounts(3, endpoints, leaves, spines, math.ceil(sc_links / k), endpoints, leaf_up_links, sc_links, cap)
