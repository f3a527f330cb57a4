"""The simulated network: every NVLink port, NIC, leaf, spine and core link of one cluster, as arrays.

Built from the engine's :class:`~engine.fabric.topology.Topology` (what the fabric sizing built), so the
simulator sees the same switches and cables that the cost model prices. The structure is the folded Clos of
:mod:`engine.fabric.sizing`:

* GPU ``g`` sits on node ``g // gpus_per_node``; its NIC is ``node * nics_per_node + local * nics // gpus``.
  A GPU reaches the GPUs of its NVLink domain (8-GPU HGX node, 72-GPU NVL72 rack) through one NVLink port
  per direction (unidirectional NVLink bandwidth).
* NIC ``j`` of a node belongs to plane ``j % planes`` and, inside the plane, to rail ``j // planes``
  (rail-optimized: one rail per NIC index; fat-tree: one rail). Fat-tree leaves take the plane's NICs in order
  (node-major); a rail's leaves take NIC ``j`` of ``leaf_down`` consecutive nodes. Leaves are numbered
  block-major (``block * rails + rail``) so that a pod of ``k/2`` leaves holds every rail of a block of nodes,
  as in a DGX SuperPOD scalable unit.
* A leaf has ``up`` cabled uplinks; uplink ``u`` goes to spine ``u % S`` (2 tiers: ``S`` spines per plane;
  3 tiers: ``S`` spines per pod of ``k/2`` leaves). In 3 tiers a spine has ``h`` uplinks; spine ``j`` of every
  pod connects to core group ``j`` (``Cg`` cores) and uplink ``c`` goes to core ``c % Cg`` of that group.

Two link sets share the endpoint links (NVLink and NIC, numbered first): ``cables`` has one link per direction
of every physical cable (for hashed and pinned routing, where a flow takes one cable per hop), ``bundles``
aggregates the cables a flow may spread over (a leaf's uplinks, a pod's spine-core links) for adaptive routing
and packet spraying, where traffic is split evenly over every equal-cost cable. A bundle carries
``routing.AR_EFF`` of its cables' capacity (0.97 InfiniBand, 0.95 Ethernet): the residual imbalance and
reordering of per-packet / flowlet balancing that the performance model's closed form charges too, so a study of
adaptive routing and the shipped model agree where the uplinks are busy (and an idle bundle loses nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.fabric.routing import AR_EFF

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# Tier codes of links (index into TIERS).
TIERS = ("nvlink", "nic", "leaf-spine", "spine-core")
NVLINK, NIC, LEAF_SPINE, SPINE_CORE = 0, 1, 2, 3


@dataclass(frozen=True)
class Network:
    """The structural numbers of one cluster's network (all per plane unless named ``*_total``)."""

    gpus: int
    gpus_per_node: int
    nics_per_node: int
    nodes: int
    nvlink_domain: int  # GPUs per NVLink domain
    nvlink_gbps: float  # one direction, per GPU
    nic_gbps: float
    link_gbps: float
    topology: str
    fabric: str
    tiers: int
    radix: int
    planes: int
    rails: int  # leaf groups per plane
    leaf_down: int  # NICs per leaf
    up: int  # cabled uplinks per leaf (0 in a 1-tier fabric)
    leaves: int  # per plane
    spines: int  # per plane (2 tiers) or per pod (3 tiers)
    pod_leaves: int  # leaves per pod (3 tiers); = leaves otherwise
    pods: int  # per plane
    spine_up: int  # cabled uplinks per spine (3 tiers)
    cores: int  # per plane
    oversubscription: float  # leaf down:up as built

    # ---------------------------------------------------------------- counts
    @property
    def nics(self) -> int:
        return self.nodes * self.nics_per_node

    @property
    def nics_per_plane_node(self) -> int:
        return self.nics_per_node // self.planes

    @property
    def leaves_total(self) -> int:
        return self.leaves * self.planes

    @property
    def spines_total(self) -> int:
        return self.spines * (self.pods if self.tiers == 3 else 1) * self.planes

    @property
    def pods_total(self) -> int:
        return self.pods * self.planes

    @property
    def core_groups(self) -> int:
        return max(1, self.cores // max(1, self.spines))

    def physical_links(self) -> dict[str, int]:
        """Directed links per tier (each cable counts twice, once per direction)."""
        out = {"nvlink": 2 * self.gpus if self.nvlink_domain > 1 else 0, "nic": 2 * self.nics}
        out["leaf-spine"] = 2 * self.leaves_total * self.up if self.tiers >= 2 else 0
        out["spine-core"] = 2 * self.spines_total * self.spine_up if self.tiers == 3 else 0
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "topology": self.topology, "fabric": self.fabric, "tiers": self.tiers, "radix": self.radix,
            "planes": self.planes, "rails": self.rails, "gpus": self.gpus, "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node, "nics_per_node": self.nics_per_node,
            "nvlink_domain_gpus": self.nvlink_domain, "nvlink_gbps": self.nvlink_gbps, "nic_gbps": self.nic_gbps,
            "link_gbps": self.link_gbps, "leaf_down": self.leaf_down, "leaf_up": self.up,
            "leaves": self.leaves_total, "spines": self.spines_total, "cores": self.cores * self.planes,
            "pods": self.pods_total if self.tiers == 3 else 0, "spine_up": self.spine_up if self.tiers == 3 else 0,
            "oversubscription": self.oversubscription, "links": self.physical_links(),
        }

    # ---------------------------------------------------------------- endpoints
    def nic_of_gpu(self, gpu: IntArray) -> IntArray:
        node, local = np.divmod(gpu, self.gpus_per_node)
        return node * self.nics_per_node + (local * self.nics_per_node) // self.gpus_per_node

    def domain_of_gpu(self, gpu: IntArray) -> IntArray:
        return gpu // self.nvlink_domain

    def nic_place(self, nic: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(plane, leaf index within the plane, slot on the leaf) of each NIC."""
        node, j = np.divmod(nic, self.nics_per_node)
        plane = j % self.planes
        jj = j // self.planes  # NIC index inside the plane (0 .. nics_per_plane_node-1)
        if self.rails == 1:
            pos = node * self.nics_per_plane_node + jj
            leaf, slot = np.divmod(pos, self.leaf_down)
        else:
            rail = jj % self.rails
            block, slot = np.divmod(node, self.leaf_down)
            leaf = block * self.rails + rail
        return plane, leaf, slot

    # ---------------------------------------------------------------- link numbering
    @property
    def n_endpoint_links(self) -> int:
        return 2 * self.gpus + 2 * self.nics

    def nv_out(self, gpu: IntArray) -> IntArray:
        return gpu

    def nv_in(self, gpu: IntArray) -> IntArray:
        return self.gpus + gpu

    def nic_up(self, nic: IntArray) -> IntArray:
        return 2 * self.gpus + nic

    def nic_down(self, nic: IntArray) -> IntArray:
        return 2 * self.gpus + self.nics + nic

    def endpoint_capacity(self) -> tuple[FloatArray, npt.NDArray[np.int8]]:
        cap = np.empty(self.n_endpoint_links)
        tier = np.empty(self.n_endpoint_links, dtype=np.int8)
        cap[: 2 * self.gpus] = self.nvlink_gbps
        tier[: 2 * self.gpus] = NVLINK
        cap[2 * self.gpus:] = self.nic_gbps
        tier[2 * self.gpus:] = NIC
        return cap, tier


@dataclass(frozen=True)
class LinkSet:
    """Capacities (Gb/s) and tier codes of every simulated link, plus where each block starts."""

    capacity: FloatArray
    tier: npt.NDArray[np.int8]
    bundled: bool
    ls_up: int  # first leaf-uplink id (cable: leaf*up + u; bundle: leaf)
    ls_down: int
    sc_up: int  # first spine-uplink id (cable: spine*h + c; bundle: pod)
    sc_down: int

    @property
    def size(self) -> int:
        return int(self.capacity.size)


def cable_links(net: Network) -> LinkSet:
    """One link per direction of every cable."""
    ep_cap, ep_tier = net.endpoint_capacity()
    n_ls = net.leaves_total * net.up if net.tiers >= 2 else 0
    n_sc = net.spines_total * net.spine_up if net.tiers == 3 else 0
    base = ep_cap.size
    cap = np.concatenate([ep_cap, np.full(2 * n_ls + 2 * n_sc, net.link_gbps)])
    tier = np.concatenate([ep_tier, np.full(2 * n_ls, LEAF_SPINE, dtype=np.int8),
                           np.full(2 * n_sc, SPINE_CORE, dtype=np.int8)])
    return LinkSet(cap, tier, False, base, base + n_ls, base + 2 * n_ls, base + 2 * n_ls + n_sc)


def bundle_links(net: Network) -> LinkSet:
    """Endpoint links plus one aggregate per leaf uplink set and per pod's spine-core link set."""
    ep_cap, ep_tier = net.endpoint_capacity()
    n_l = net.leaves_total if net.tiers >= 2 else 0
    n_p = net.pods_total if net.tiers == 3 else 0
    base = ep_cap.size
    ar = AR_EFF.get(net.fabric, min(AR_EFF.values()))  # adaptive balancing's residual loss (module docstring)
    cap = np.concatenate([
        ep_cap,
        np.full(2 * n_l, ar * net.up * net.link_gbps),
        np.full(2 * n_p, ar * net.spines * net.spine_up * net.link_gbps),
    ])
    tier = np.concatenate([ep_tier, np.full(2 * n_l, LEAF_SPINE, dtype=np.int8),
                           np.full(2 * n_p, SPINE_CORE, dtype=np.int8)])
    return LinkSet(cap, tier, True, base, base + n_l, base + 2 * n_l, base + 2 * n_l + n_p)


def describe_link(net: Network, links: LinkSet, link: int) -> str:
    """A readable name for link id ``link``."""
    g, e = net.gpus, net.nics
    if link < g:
        return f"GPU {link} NVLink out"
    if link < 2 * g:
        return f"GPU {link - g} NVLink in"
    if link < 2 * g + e:
        return f"NIC {link - 2 * g} -> leaf"
    if link < 2 * g + 2 * e:
        return f"leaf -> NIC {link - 2 * g - e}"
    spine_word = "spine" if net.tiers == 2 else "pod spine"
    if links.bundled:
        if link < links.ls_down:
            return f"leaf {link - links.ls_up} uplinks (all {net.up})"
        if link < links.sc_up:
            return f"leaf {link - links.ls_down} downlinks (all {net.up})"
        if link < links.sc_down:
            return f"pod {link - links.sc_up} spine->core links"
        return f"pod {link - links.sc_down} core->spine links"
    if link < links.ls_down:
        leaf, u = divmod(link - links.ls_up, net.up)
        return f"leaf {leaf} uplink {u} -> {spine_word} {u % net.spines}"
    if link < links.sc_up:
        leaf, u = divmod(link - links.ls_down, net.up)
        return f"{spine_word} {u % net.spines} -> leaf {leaf} (cable {u})"
    h = net.spine_up
    if link < links.sc_down:
        spine, c = divmod(link - links.sc_up, h)
        return f"spine {spine} uplink {c} -> core {(spine % net.spines) * net.core_groups + c % net.core_groups}"
    spine, c = divmod(link - links.sc_down, h)
    return f"core {(spine % net.spines) * net.core_groups + c % net.core_groups} -> spine {spine} (cable {c})"


# --------------------------------------------------------------------------------------------- construction


def network_for(topo: Any, nvlink_gbps: float) -> Network:
    """The simulated :class:`Network` of an engine :class:`~engine.fabric.topology.Topology`.

    ``nvlink_gbps`` is one GPU's NVLink bandwidth in one direction (Gb/s). Spine, pod and core counts are the
    sizing's (``topo.switches`` / ``topo.links``); a top tier thinned for non-blocking pods shows as fewer
    cabled leaf (2 tiers) or spine (3 tiers) uplinks.
    """
    tiers = int(topo.tiers)
    planes = max(1, int(topo.planes))
    rails = max(1, int(topo.rails))
    k = int(topo.radix)
    nodes = int(topo.nodes)
    nics_per_node = int(topo.nics_per_node)
    down = max(1, int(topo.leaf_down_ports))
    per_plane_node = nics_per_node // planes
    if tiers == 1:
        leaves = 1
        down = max(down, nodes * per_plane_node)
    elif rails == 1:
        leaves = math.ceil(nodes * per_plane_node / down)
    else:
        leaves = rails * math.ceil(nodes / down)
    links = topo.links
    switches = topo.switches
    up = spines = pods = spine_up = cores = 0
    pod_leaves = leaves
    if tiers >= 2:
        ls = int(links.get("leaf_spine", 0)) // planes
        up = max(1, round(ls / leaves)) if ls else int(topo.leaf_up_ports)
    if tiers == 2:
        pods = 1
        spines = max(1, int(switches.get("spine", 0)) // planes) if switches.get("spine") else math.ceil(leaves * up / k)
        spines = min(spines, up) if spines > up else spines
    elif tiers == 3:
        # pods as the sizing built them: its pod_leaves (k/2, or fewer for a requested cluster.pod_gpus), each
        # with ceil(pod_leaves * up / (k/2)) spines (a full pod of k/2 leaves: one spine per leaf uplink)
        plan = getattr(topo, "plan", None)
        built = int(getattr(plan, "pod_leaves", 0) or 0)
        if not built and int(getattr(topo, "leaf_gpus", 0) or 0) > 0:
            built = rails * math.ceil(int(topo.pod_gpus) / int(topo.leaf_gpus))
        pod_leaves = max(1, min(k // 2, built or k // 2, leaves))
        pods = math.ceil(leaves / pod_leaves)
        spines = max(1, math.ceil(pod_leaves * up / max(1, k // 2)))
        sc = int(links.get("spine_core", 0)) // planes
        spine_up = max(1, round(sc / (pods * spines))) if sc else max(1, k // 2)
        cores = max(1, int(switches.get("core", 0)) // planes) if switches.get("core") else math.ceil(sc / k)
    raw_over = topo.oversubscription
    over = float(raw_over.get("leaf", 1.0)) if isinstance(raw_over, Mapping) else float(raw_over or 1.0)
    return Network(
        gpus=int(topo.gpus), gpus_per_node=int(topo.gpus_per_node), nics_per_node=nics_per_node, nodes=nodes,
        nvlink_domain=max(1, min(int(topo.nvlink_domain_gpus), int(topo.gpus))), nvlink_gbps=float(nvlink_gbps),
        nic_gbps=float(topo.nic_gbps), link_gbps=float(topo.link_gbps), topology=str(topo.topology),
        fabric=str(topo.fabric), tiers=tiers, radix=k, planes=planes, rails=rails, leaf_down=down, up=up,
        leaves=leaves, spines=spines, pod_leaves=pod_leaves, pods=pods, spine_up=spine_up, cores=cores,
        oversubscription=over,
    )
