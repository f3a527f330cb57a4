"""``simulate``: place a job, generate a collective phase's flows, route them, share bandwidth max-min fairly,
and report completion-time efficiency against an ideal fabric, over seeds.

Efficiency of a collective = ideal completion time / simulated completion time, where the ideal keeps the same
flows, NICs and NVLink ports but gives the switch fabric infinite capacity (a perfect non-blocking crossbar):
it isolates what the fabric (topology, oversubscription, routing, placement) costs. A phase completes when its
slowest rate group does, so one hot uplink decides a ring all-reduce, not the mean.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.budget import checkpoint
from engine.catalog import CatalogItems, get_item
from engine.document.parse import parse_scenario
from engine.errors import NOT_A_CHOICE, ScenarioError
from engine.flowsim import traffic as tr
from engine.flowsim.estimate import SimulationEstimate, check_simulation, estimate_job
from engine.flowsim.network import (
    TIERS,
    FloatArray,
    IntArray,
    LinkSet,
    Network,
    bundle_links,
    cable_links,
    describe_link,
    network_for,
)
from engine.flowsim.paths import net_incidence
from engine.flowsim.placement import GROUPS, JOB_PLACEMENTS, Layout, place_nodes, rank_gpus
from engine.flowsim.rates import link_load, max_min_rates
from engine.schema.bounds import check_field
from engine.schema.enums import DEFAULT_QPS, Routing
from engine.schema.types import ScenarioSpec

FLOWSIM_VERSION = "1.0"
MAX_CHANNELS = 64
HIST_BINS = 20
_SAMPLE_PER_SEED = 50_000


@dataclass(frozen=True)
class Collective:
    kind: str
    group: str

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.group}"


def _default_group(kind: str, layout: Layout) -> str:
    if kind == "all-to-all":
        return "ep" if layout.ep > 1 else "all"
    if kind == "pp-sendrecv":
        return "pp"
    return "all"


def _parse_traffic(traffic: str | Sequence[str], group: str | None, layout: Layout) -> list[Collective]:
    items = [traffic] if isinstance(traffic, str) else list(traffic)
    if not items:
        raise ScenarioError("traffic", "needs at least one collective")
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ScenarioError("traffic", f"must be a string or a list of strings, got {item!r}")
        kind, _, grp = item.partition(":")
        if kind not in tr.TRAFFIC:
            raise ScenarioError("traffic", f"must be one of {', '.join(tr.TRAFFIC)} (optionally ':group'), got {item!r}")
        grp = grp or group or _default_group(kind, layout)
        if grp not in GROUPS:
            raise ScenarioError("group", f"must be one of {', '.join(GROUPS)}, got {grp!r}")
        out.append(Collective(kind, grp))
    return out


def _layout(s: ScenarioSpec, ranks: int, net: Network, needs_layout: bool) -> tuple[Layout, bool]:
    """The job's degrees from the scenario's parallelism; (layout, taken from the scenario)."""
    p = s.parallelism
    tp, cp, pp, ep = p.tp or min(net.gpus_per_node, ranks), p.cp or 1, p.pp or 1, p.ep or 1
    etp = p.etp if p.etp is not None and p.etp != tp else None  # MoE parallel folding
    dp = ranks // (tp * cp * pp)
    experts_fit = (tp * cp * dp) % (etp * ep) == 0 if etp is not None else (dp * cp) % ep == 0
    if ranks % (tp * cp * pp) == 0 and experts_fit:
        return Layout(tp, cp, dp, pp, ep, etp), True
    if needs_layout:
        rule = "etp*ep divide tp*cp*dp" if etp is not None else "ep divide dp*cp"
        raise ScenarioError("ranks", f"{ranks} ranks do not fit the scenario's layout tp={tp} cp={cp} pp={pp} "
                                     f"ep={ep} (tp*cp*pp must divide ranks and {rule})")
    return Layout(1, 1, ranks, 1, 1), False


def _plain(value: Any) -> Any:
    """A numpy integer as a Python int (the bounds check takes JSON's types); anything else as it is."""
    return int(value) if isinstance(value, np.integer) else value


def _check_int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ScenarioError(name, f"must be an integer, got {value!r}")
    if not lo <= int(value) <= hi:
        raise ScenarioError(name, f"must be between {lo} and {hi}, got {value}")
    return int(value)


def _check_fraction(value: Any, name: str, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise ScenarioError(name, f"must be a number, got {value!r}")
    if not 0.0 <= float(value) <= hi:
        raise ScenarioError(name, f"must be between 0 and {hi:g}, got {value}")
    return float(value)


def _pct(values: Sequence[float] | FloatArray) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {"p10": 0.0, "p50": 0.0, "p90": 0.0, "mean": 0.0, "min": 0.0, "max": 0.0}
    p10, p50, p90 = np.percentile(a, [10, 50, 90])
    return {"p10": float(p10), "p50": float(p50), "p90": float(p90), "mean": float(a.mean()),
            "min": float(a.min()), "max": float(a.max())}


def nvlink_gbps(gpu_key: str, catalog: CatalogItems | None = None) -> float:
    """One GPU's NVLink bandwidth in one direction, Gb/s (catalog ``nvlink_gbytes_per_s`` is both directions)."""
    specs = get_item(gpu_key, "gpu", "cluster.gpu", catalog).get("specs") or {}
    return float(specs.get("nvlink_gbytes_per_s") or 0.0) * 8.0 / 2.0


def _generate(net: Network, cols: list[Collective], layout: Layout, gpus: IntArray, channels: int,
              rail_aligned: bool, rng: np.random.Generator) -> tr.FlowSet:
    fs = tr.FlowSet()
    for ci, col in enumerate(cols):
        members = gpus[layout.groups(col.group)]
        if col.kind in tr.RING_KINDS:
            tr.ring(net, fs, members, channels, rail_aligned, ci)
        elif col.kind == "tree-allreduce":
            tr.tree(net, fs, members, channels, ci)
        elif col.kind == "all-to-all":
            tr.all_to_all(net, fs, members, ci)
        elif col.kind == "pp-sendrecv":
            tr.sendrecv(net, fs, members, ci)
        elif col.kind == "permutation":
            for row in members:
                tr.node_permutation(net, fs, row, rng, ci, rail_aligned)
        elif col.kind == "cross-leaf":
            by = tr.leaf_nodes(net) * net.gpus_per_node
            for row in members:
                if by >= row.size:
                    raise ScenarioError("ranks", f"cross-leaf traffic needs more than one leaf's worth of ranks "
                                                 f"({by}); the group has {row.size}")
                tr.shift(net, fs, row, by, ci)
    return fs


def _incidence(net: Network, links: LinkSet, flows: tr.Flows, routing: str,
               seed: int) -> tuple[IntArray, IntArray]:
    """(link, rate group) of every incidence entry: NVLink flows cross their GPUs' ports, network flows
    their route."""
    fi, li = net_incidence(net, links, flows.net_src, flows.net_dst, flows.net_key,
                           "pinned" if routing == "pinned" else "ecmp", seed)
    link = np.concatenate([net.nv_out(flows.nv_src), net.nv_in(flows.nv_dst), li])
    group = np.concatenate([flows.nv_group, flows.nv_group, flows.net_group[fi]])
    return link, group


@dataclass(frozen=True)
class PreparedSimulation:
    """One simulation's validated inputs, before any per-seed array: :func:`simulate` runs it, :func:`estimate`
    prices it (both go through :func:`prepare_simulation`: what the simulation would refuse, the estimate refuses)."""

    net: Network
    cols: list[Collective]
    layout: Layout
    from_scenario: bool
    routing: str
    qps: int
    seeds: int
    placement: str
    fragmentation: float
    background: float
    channels: int
    rail_aligned: bool
    n_ranks: int
    job_nodes: int

    def estimate(self) -> SimulationEstimate:
        return estimate_job(self.net, self.layout, [(c.kind, c.group) for c in self.cols], placement=self.placement,
                            channels=self.channels, qps=self.qps, routing=self.routing, background=self.background,
                            job_nodes=self.job_nodes, seeds=self.seeds)


def prepare_simulation(scenario: Mapping[str, Any] | ScenarioSpec, traffic: str | Sequence[str] = "ring-allreduce",
                       ranks: int | None = None, routing: str | None = None, qps: int | None = None,
                       placement: str = "packed", seeds: int = 20, *, group: str | None = None,
                       channels: int | None = None, fragmentation: float = 0.5, background: float = 0.0,
                       rail_aligned: bool | None = None, catalog: CatalogItems | None = None) -> PreparedSimulation:
    """Parse and check every input of :func:`simulate` (same arguments) and build the job's network shape."""
    s = parse_scenario(scenario, catalog)
    topo = s.topo
    c = s.cluster
    routing = c.routing if routing is None else routing
    if routing not in Routing.values():
        raise ScenarioError("routing", f"must be one of {', '.join(Routing.values())}, got {routing!r}", NOT_A_CHOICE)
    if qps is None:
        qps = c.qps_per_connection if routing == c.routing else DEFAULT_QPS.get(routing, 1)
    # one bound each (engine.schema.bounds): QPs are a cluster.qps_per_connection, seeds a study's seeds
    qps = int(check_field(_plain(qps), "qps", like="cluster.qps_per_connection"))
    seeds = int(check_field(_plain(seeds), "seeds", like="fabric_study.seeds"))
    if placement not in JOB_PLACEMENTS:
        raise ScenarioError("placement", f"must be one of {', '.join(JOB_PLACEMENTS)}, got {placement!r}")
    fragmentation = _check_fraction(fragmentation, "fragmentation", 0.95)
    background = _check_fraction(background, "background", 1.0)
    net = network_for(topo, nvlink_gbps(c.gpu, catalog))
    n_ranks = net.gpus if ranks is None else _check_int(ranks, "ranks", 1, net.gpus)
    if n_ranks > net.gpus_per_node and n_ranks % net.gpus_per_node:
        raise ScenarioError("ranks", f"{n_ranks} is not a whole number of {net.gpus_per_node}-GPU nodes")
    job_nodes_n = math.ceil(n_ranks / net.gpus_per_node)
    if placement == "fragmented" and job_nodes_n > (1.0 - fragmentation) * net.nodes:
        raise ScenarioError("fragmentation", f"{fragmentation:g} of {net.nodes} nodes taken leaves fewer than "
                                             f"the job's {job_nodes_n} nodes")
    # NCCL opens at least one ring per NIC of a node (and at most MAXCHANNELS = 64 in recent releases)
    channels = min(net.nics_per_node, MAX_CHANNELS) if channels is None else \
        _check_int(channels, "channels", 1, MAX_CHANNELS)
    if net.planes > 1:
        rail_aligned = True  # planes are disjoint networks: a NIC only reaches its own index elsewhere
    elif rail_aligned is None:
        rail_aligned = True
    probe = Layout(1, 1, n_ranks, 1, 1)
    cols = _parse_traffic(traffic, group, probe)
    needs = any(col.group != "all" for col in cols)
    layout, from_scenario = _layout(s, n_ranks, net, needs)
    cols = _parse_traffic(traffic, group, layout)
    for col in cols:  # what the generator would refuse at the first seed, refused before any seed
        by = tr.leaf_nodes(net) * net.gpus_per_node
        size = int(layout.groups(col.group).shape[1]) if col.kind == "cross-leaf" else 0
        if col.kind == "cross-leaf" and by >= size:
            raise ScenarioError("ranks", f"cross-leaf traffic needs more than one leaf's worth of ranks ({by}); "
                                         f"the group has {size}")
    return PreparedSimulation(net, cols, layout, from_scenario, routing, qps, seeds, placement, fragmentation,
                              background, channels, rail_aligned, n_ranks, job_nodes_n)


def estimate(scenario: Mapping[str, Any] | ScenarioSpec, traffic: str | Sequence[str] = "ring-allreduce",
             ranks: int | None = None, routing: str | None = None, qps: int | None = None,
             placement: str = "packed", seeds: int = 20, *, group: str | None = None,
             channels: int | None = None, fragmentation: float = 0.5, background: float = 0.0,
             rail_aligned: bool | None = None, seed: int = 0, catalog: CatalogItems | None = None,
             progress: Callable[[int, int], None] | None = None) -> SimulationEstimate:
    """What :func:`simulate` with the same arguments would cost (flows, memory, seconds), without simulating.

    Raises the :class:`ScenarioError` that :func:`simulate` would raise for bad input; ``seed`` and ``progress``
    are accepted (and ignored) so a caller can pass the same keywords to both.
    """
    return prepare_simulation(scenario, traffic, ranks, routing, qps, placement, seeds, group=group,
                              channels=channels, fragmentation=fragmentation, background=background,
                              rail_aligned=rail_aligned, catalog=catalog).estimate()


def simulate(scenario: Mapping[str, Any] | ScenarioSpec, traffic: str | Sequence[str] = "ring-allreduce",
             ranks: int | None = None, routing: str | None = None, qps: int | None = None,
             placement: str = "packed", seeds: int = 20, *, group: str | None = None,
             channels: int | None = None, fragmentation: float = 0.5, background: float = 0.0,
             rail_aligned: bool | None = None, seed: int = 0, catalog: CatalogItems | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Simulate one collective phase (or several concurrent ones) of a job on the scenario's cluster.

    ``traffic``: a kind from :data:`traffic.TRAFFIC`, optionally ``"kind:group"`` (group one of ``all``, ``tp``,
    ``cp``, ``dp``, ``pp``, ``ep``), or a list of them to run concurrently. ``ranks``: job size in GPUs (default:
    all). ``routing``: ``ecmp`` | ``ecmp-qp`` | ``adaptive`` | ``pinned`` (default: the scenario's
    ``cluster.routing``). ``qps``: queue pairs per connection (default: the scenario's for its own routing,
    else 1, or 4 for ``ecmp-qp``). ``placement``: ``packed`` | ``random`` | ``fragmented`` (``fragmentation`` =
    fraction of nodes already taken). ``background``: fraction of the other nodes running an all-NIC node
    permutation of other jobs. ``channels``: NCCL channels (rings or trees) per collective; default one per NIC.
    ``rail_aligned``: inter-node hops stay on one NIC index (NCCL with PXN; default True; always on multi-plane).
    ``progress(done, total)`` is called after every seed (a job runner reports it and may raise to cancel).
    """
    t0 = time.perf_counter()
    prepared = prepare_simulation(scenario, traffic, ranks, routing, qps, placement, seeds, group=group,
                                  channels=channels, fragmentation=fragmentation, background=background,
                                  rail_aligned=rail_aligned, catalog=catalog)
    check_simulation(prepared.estimate())  # flows and memory, before the first array is built
    p = prepared
    net, cols, layout, from_scenario = p.net, p.cols, p.layout, p.from_scenario
    routing, qps, seeds, n_ranks, job_nodes_n = p.routing, p.qps, p.seeds, p.n_ranks, p.job_nodes
    fragmentation, background, channels, rail_aligned = p.fragmentation, p.background, p.channels, p.rail_aligned
    links = bundle_links(net) if routing == "adaptive" else cable_links(net)
    n_ep = net.n_endpoint_links

    eff: list[list[float]] = [[] for _ in cols]
    gbps: list[list[float]] = [[] for _ in cols]
    gbps_ideal: list[float] = [0.0 for _ in cols]
    overall: list[float] = []
    btiers: Counter[str] = Counter()
    tier_util: dict[str, list[float]] = {t: [] for t in TIERS}
    tier_max: dict[str, list[float]] = {t: [] for t in TIERS}
    tier_used: dict[str, list[int]] = {t: [] for t in TIERS}
    hist = np.zeros(HIST_BINS, dtype=np.int64)
    samples: list[FloatArray] = []
    flow_mean: list[float] = []
    per_seed_links: list[list[dict[str, Any]]] = []
    n_flows = n_net = n_nv = 0
    for i in range(seeds):
        checkpoint()  # a caller's time budget or cancellation (engine.budget) stops between seeds
        rng = np.random.default_rng([seed, i])
        job_nodes = place_nodes(net, job_nodes_n, placement, rng, fragmentation)
        gpus = rank_gpus(net, job_nodes, n_ranks)
        fs = _generate(net, cols, layout, gpus, channels, rail_aligned, rng)
        if background > 0:
            others = np.setdiff1d(np.arange(net.nodes), job_nodes)
            busy = others[rng.random(others.size) < background]
            if busy.size >= 2:
                bg = (busy[:, None] * net.gpus_per_node + np.arange(net.gpus_per_node)).ravel()
                tr.node_permutation(net, fs, bg, rng, -1, rail_aligned)
        flows = tr.finish(fs, qps)
        link, grp = _incidence(net, links, flows, routing, seed * 7_919 + i)
        w = np.ones(link.size)
        endpoint = link < n_ep
        ideal, ideal_bott = max_min_rates(link[endpoint], grp[endpoint], w[endpoint], links.capacity,
                                          flows.n_groups, tier=links.tier)
        rate, bott = max_min_rates(link, grp, w, links.capacity, flows.n_groups, tier=links.tier)
        t_act = flows.group_bytes / rate
        t_ideal = flows.group_bytes / ideal
        seed_eff = []
        for ci in range(len(cols)):
            mine = flows.group_coll == ci
            if not mine.any():
                seed_eff.append(1.0)
                eff[ci].append(1.0)
                continue
            ta, ti = float(t_act[mine].max()), float(t_ideal[mine].max())
            e = min(1.0, ti / ta) if ta > 0 else 1.0
            eff[ci].append(e)
            seed_eff.append(e)
            gbps[ci].append(_gbps_per_gpu(cols[ci], flows, mine, ta, n_ranks_in(layout, cols[ci])))
            gbps_ideal[ci] = _gbps_per_gpu(cols[ci], flows, mine, ti, n_ranks_in(layout, cols[ci]))
        overall.append(min(seed_eff))
        job = flows.group_coll >= 0
        slow = int(np.flatnonzero(job)[np.argmax(t_act[job])]) if job.any() else -1
        bl = int(bott[slow]) if slow >= 0 else -1
        if slow >= 0 and rate[slow] >= ideal[slow] * (1.0 - 1e-9):  # runs at its ideal: its endpoint limits it
            bl = int(ideal_bott[slow])
        btiers[TIERS[int(links.tier[bl])] if bl >= 0 else "none"] += 1
        load = link_load(link, grp, w, rate, links.size)
        util = load / links.capacity
        for t_idx, name in enumerate(TIERS):
            sel = (links.tier == t_idx) & (load > 0)
            tier_util[name].append(float(util[sel].mean()) if sel.any() else 0.0)
            tier_max[name].append(float(util[sel].max()) if sel.any() else 0.0)
            tier_used[name].append(int(sel.sum()))
        # per-flow throughput of the job's network flows, as a fraction of the flow's ideal rate
        fgroup = flows.net_group
        fjob = flows.group_coll[fgroup] >= 0
        frac = np.minimum(1.0, rate[fgroup[fjob]] / ideal[fgroup[fjob]]) if fjob.any() else np.zeros(0)
        hist += np.histogram(frac, bins=HIST_BINS, range=(0.0, 1.0))[0]
        flow_mean.append(float(frac.mean()) if frac.size else 1.0)
        if frac.size > _SAMPLE_PER_SEED:
            frac = rng.choice(frac, _SAMPLE_PER_SEED, replace=False)
        samples.append(frac)
        per_seed_links.append(_bottleneck_links(net, links, bott, t_act, job, util, link))
        n_flows, n_net, n_nv = flows.nv_src.size + flows.net_src.size, flows.net_src.size, flows.nv_src.size
        if progress is not None:
            progress(i + 1, seeds)

    med = int(np.argsort(overall)[len(overall) // 2])
    pooled = np.concatenate(samples) if samples else np.zeros(0)
    flow_stats: dict[str, Any] = dict(_pct(pooled))
    flow_stats.update({
        "p1": float(np.percentile(pooled, 1)) if pooled.size else 0.0,
        "unit": "fraction of the flow's ideal (non-blocking fabric) rate",
        "histogram": {"edges": np.linspace(0.0, 1.0, HIST_BINS + 1).round(3).tolist(), "counts": hist.tolist()},
        "mean_per_seed": _pct(flow_mean),
    })
    physical = net.physical_links()
    bottleneck_tier = btiers.most_common(1)[0][0] if btiers else "none"
    return {
        "efficiency": _pct(overall),
        "collectives": [
            {"traffic": col.kind, "group": col.group, "groups": int(layout.groups(col.group).shape[0]),
             "ranks_per_group": int(layout.groups(col.group).shape[1]), "efficiency": _pct(eff[ci]),
             "gbps_per_gpu": _pct(gbps[ci]), "ideal_gbps_per_gpu": gbps_ideal[ci],
             "gbps_meaning": "bus bandwidth" if col.kind in (*tr.RING_KINDS, "tree-allreduce")
             else "network send rate per GPU"}
            for ci, col in enumerate(cols)
        ],
        "bottleneck_tier": bottleneck_tier,
        "bottleneck_tiers": {k: v / seeds for k, v in btiers.items()},
        "bottleneck_links": per_seed_links[med],
        "tier_utilization": {t: float(np.mean(v)) for t, v in tier_util.items() if physical.get(t, 0)},
        "tier_max_utilization": {t: float(np.mean(v)) for t, v in tier_max.items() if physical.get(t, 0)},
        "tier_links_used": {t: float(np.mean(v)) for t, v in tier_used.items() if physical.get(t, 0)},
        "flow_throughput": flow_stats,
        "flows": int(n_flows),
        "network_flows": int(n_net),
        "nvlink_flows": int(n_nv),
        "links": int(sum(physical.values())),
        "links_by_tier": physical,
        "simulated_links": int(links.size),
        "per_seed": [round(x, 6) for x in overall],
        "elapsed_s": time.perf_counter() - t0,
        "inputs": {
            "traffic": [col.name for col in cols], "ranks": n_ranks, "nodes": job_nodes_n, "routing": routing,
            "qps": qps, "placement": placement, "fragmentation": fragmentation if placement == "fragmented" else None,
            "background": background, "seeds": seeds, "seed": seed, "channels": channels,
            "rail_aligned": rail_aligned,
            "layout": {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp, "ep": layout.ep,
                       **({"etp": layout.etp} if layout.folded else {}), "from_scenario": from_scenario},
            "fabric": net.summary(),
        },
        "engine": {"name": "flowsim", "version": FLOWSIM_VERSION},
        "method": "flow-level: max-min fair rates (progressive filling); completion = slowest rate group; "
                  "no packet loss, PFC pauses, incast queueing or congestion-control dynamics",
    }


def n_ranks_in(layout: Layout, col: Collective) -> int:
    g = layout.groups(col.group)
    return int(g.size)


def _gbps_per_gpu(col: Collective, flows: tr.Flows, mine: np.ndarray, t: float, ranks: int) -> float:
    """Rings and trees: bus bandwidth (one unit per rank over the completion time); others: network bytes sent
    per GPU over the completion time. Gb/s."""
    if t <= 0:
        return 0.0
    if col.kind in (*tr.RING_KINDS, "tree-allreduce"):
        return 1.0 / t
    groups = flows.group_bytes.size
    on_net = np.zeros(groups, dtype=bool)
    on_net[flows.net_group] = True
    if not (mine & on_net).any():  # all inside NVLink domains: NVLink bytes sent per GPU
        on_net = np.zeros(groups, dtype=bool)
        on_net[flows.nv_group] = True
    nbytes = float(flows.group_bytes[mine & on_net].sum())
    return nbytes / ranks / t


def _bottleneck_links(net: Network, links: LinkSet, bott: IntArray, t_act: FloatArray, job: np.ndarray,
                      util: FloatArray, link: IntArray, top: int = 5) -> list[dict[str, Any]]:
    """The links that hold back the job's slowest rate groups (within 1% of the slowest), busiest first."""
    if not job.any():
        return []
    tmax = float(t_act[job].max())
    slow = np.flatnonzero(job & (t_act >= 0.99 * tmax))
    bl = bott[slow]
    bl = bl[bl >= 0]
    if bl.size == 0:
        return []
    uniq, counts = np.unique(bl, return_counts=True)
    flows_on = np.bincount(link, minlength=links.size)
    order = np.lexsort((-counts, -links.tier[uniq].astype(np.int64)))[:top]
    return [
        {"link": describe_link(net, links, int(uniq[j])), "tier": TIERS[int(links.tier[uniq[j]])],
         "flows": int(flows_on[uniq[j]]), "utilization": round(float(util[uniq[j]]), 4),
         "slow_groups": int(counts[j])}
        for j in order
    ]
