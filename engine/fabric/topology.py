"""The cluster's topology: what the fabric sizing built, read by both the performance and the cost model.

``parse_scenario`` sizes the fabric once (:func:`engine.fabric.sizing.size_fabric` on the parsed cluster)
and keeps the result as ``scenario.topology``, a frozen :class:`Topology` (defined in :mod:`engine.schema.types` with the other
value types; ``engine.document.parse.topology_for(doc)`` parses a document and returns it). The performance model reads where a
collective's traffic goes (inside the NVLink domain, inside a leaf, inside a pod, across the core), how many
switches it crosses and the oversubscription of each tier; the cost model prices the same switches and links.
``fabric_block`` is the ``fabric`` section both ``predict`` and ``tco`` return, so a reader sees which cluster
was assumed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from engine.catalog import CatalogError, CatalogItems, get_item
from engine.errors import ScenarioError
from engine.fabric.sizing import FabricPlan, plan_for
from engine.schema.types import ScenarioSpec, Topology


def _ratio(down: int, up: int) -> float:
    return max(1.0, down / up) if up > 0 else 1.0


def topology_from_plan(plan: FabricPlan, routing: str, qps: int, nvlink_domain_gpus: int) -> Topology:
    """Derive the :class:`Topology` from a sized :class:`FabricPlan`."""
    spec = plan.spec
    nodes = spec.nodes
    tiers = plan.tiers
    nics_per_plane_rail = max(1, spec.nics_per_node // (plan.planes * plan.rails))
    down = plan.leaf_down if tiers > 1 else plan.radix
    nodes_per_leaf = min(float(nodes), down / nics_per_plane_rail)
    leaf_gpus = int(min(spec.gpus, max(1, math.floor(nodes_per_leaf * spec.gpus_per_node))))
    links = dict(plan.links)
    oversub = {
        "leaf": _ratio(links["node_leaf"], links["leaf_spine"]) if tiers >= 2 else 1.0,
        "spine": _ratio(links["leaf_spine"], links["spine_core"]) if tiers == 3 else 1.0,
    }
    if tiers == 3:  # a pod is k/2 leaves of one plane, or the smaller pod the scenario asked for
        pod_nodes = (plan.pod_leaves or plan.radix // 2) * down / nics_per_plane_rail / plan.rails
        pod = int(min(spec.gpus, max(leaf_gpus, math.floor(pod_nodes * spec.gpus_per_node))))
    elif tiers == 2 and oversub["leaf"] > 1.0:  # leaving a leaf is already oversubscribed: the leaf is the pod
        pod = leaf_gpus
    else:
        pod = spec.gpus
    hops = {"leaf": 1, "pod": min(3, 2 * tiers - 1), "core": 2 * tiers - 1}
    return Topology(
        fabric=spec.fabric,
        topology=spec.topology,
        routing=routing,
        qps_per_connection=qps,
        switch=plan.switch_model,
        nic=plan.nic_model,
        radix=plan.radix,
        link_gbps=plan.link_gbps,
        nic_gbps=spec.nic_gbps,
        tiers=tiers,
        planes=plan.planes,
        rails=plan.rails,
        gpus=spec.gpus,
        nodes=nodes,
        gpus_per_node=spec.gpus_per_node,
        nics_per_node=spec.nics_per_node,
        nvlink_domain_gpus=nvlink_domain_gpus,
        leaf_down_ports=down,
        leaf_up_ports=plan.leaf_up,
        nodes_per_leaf=nodes_per_leaf,
        leaf_gpus=leaf_gpus,
        pod_gpus=pod,
        max_gpus=plan.max_gpus,
        switches=dict(plan.switches),
        links=links,
        oversubscription=oversub,
        hops=hops,
    )


def build_topology(s: ScenarioSpec, catalog: CatalogItems | None = None) -> Topology:
    """Size the fabric of a parsed scenario (its ``topology`` may still be unset) and return its topology.

    Raises :class:`ScenarioError` naming the field when the fabric cannot be built or the switch cannot route
    the way ``cluster.routing`` asks.
    """
    try:
        plan = plan_for(s, catalog)
    except CatalogError as exc:
        raise ScenarioError(exc.field, exc.message) from exc
    c = s.cluster
    supported = [str(r) for r in (plan.switch_item.get("specs") or {}).get("routing") or ()]
    if supported and c.routing not in supported:
        raise ScenarioError(
            "cluster.routing",
            f"switch {plan.switch_model} does not support {c.routing!r} routing; it supports {', '.join(supported)}",
        )
    if c.in_network_reduction and not (plan.switch_item.get("specs") or {}).get("sharp"):
        raise ScenarioError(
            "cluster.in_network_reduction",
            f"switch {plan.switch_model} has no in-network reduction (SHARP); use an InfiniBand switch that has it",
        )
    domain = c.gpus_per_node
    if s.fabric is not None and s.fabric.server is not None:
        server = get_item(s.fabric.server, "server", "costs.server", catalog)
        domain = int((server.get("specs") or {}).get("nvlink_domain_gpus") or c.gpus_per_node)
    if c.gpus_per_rack is not None:  # the job's GPUs in one rack-scale domain (the others are spares)
        domain = min(domain, c.gpus_per_rack)
    topo = topology_from_plan(plan, c.routing, c.qps_per_connection, min(domain, c.gpus))
    return replace(topo, in_network_reduction=c.in_network_reduction, plan=plan)


def fabric_block(t: Topology) -> dict[str, Any]:
    """The ``fabric`` section shared by ``predict`` and ``tco`` results (tco adds media, ports and power)."""
    return {
        "fabric": t.fabric,
        "topology": t.topology,
        "routing": t.routing,
        "switch_model": t.switch,
        "nic_model": t.nic,
        "radix": t.radix,
        "link_gbps": t.link_gbps,
        "tiers": t.tiers,
        "planes": t.planes,
        "rails": t.rails,
        "switches": dict(t.switches),
        "links": dict(t.links),
        "oversubscription": dict(t.oversubscription),
        "nodes_per_leaf": t.nodes_per_leaf,
        "leaf_gpus": t.leaf_gpus,
        "pod_gpus": t.pod_gpus,
        "nvlink_domain_gpus": t.nvlink_domain_gpus,
        "in_network_reduction": t.in_network_reduction,
        "max_gpus": t.max_gpus,
    }
