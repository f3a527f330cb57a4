"""Traffic: the flows of one collective phase, grouped into rate groups.

Units: every collective moves one unit of data per rank (bytes cancel in efficiency = ideal time / time). A
*rate group* moves at one rate; its completion time is ``bytes / rate``.

* Ring (all-reduce, all-gather, reduce-scatter share one flow pattern; the bus-bandwidth convention of
  nccl-tests removes their byte factors): ``channels`` rings per group, as NCCL opens channels. GPUs are taken in
  NVLink-domain order; inside a domain channel ``c`` starts at the domain's ``c mod m``-th GPU and visits all
  ``m`` of them over NVLink; the hop to the next domain leaves through the first GPU's NIC and, rail-aligned
  (NCCL enters and leaves a node through the same NIC index; PXN moves the data over NVLink), lands on the same
  NIC index of the next domain. Not rail-aligned: it leaves through the last GPU's NIC and lands on the next
  domain's first GPU's NIC. Each channel is one pipelined rate group.
* Tree: NCCL's double binary tree over the group's domains (channel ``c`` uses tree ``c mod 2``, the second
  the mirror of the first), a chain over NVLink inside each domain; reduce and broadcast flows run together.
* All-to-all (MoE dispatch/combine, DeepEP-style): each GPU sends once per remote domain through its own NIC
  to the same NIC index there (per-node deduplication), and the receiving GPU forwards over NVLink; every flow
  is its own rate group.
* Pipeline send/recv: stage ``s`` to ``s+1`` activations and ``s+1`` to ``s`` gradients, concurrently.
* Permutation: a random derangement of the job's nodes, each GPU to the same local GPU of its partner node.
* Cross-leaf: rank ``r`` to ``r + ranks_per_leaf`` (every NIC to the same slot one leaf over): the worst case
  for leaf uplinks, used by the closed-form checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.errors import ScenarioError
from engine.flowsim.network import FloatArray, IntArray, Network

RING_KINDS = ("ring-allreduce", "ring-allgather", "ring-reducescatter")
TRAFFIC = (*RING_KINDS, "tree-allreduce", "all-to-all", "pp-sendrecv", "permutation", "cross-leaf")
MAX_FLOWS = 6_000_000  # per seed, after QP expansion: ~1 GB of incidence arrays


@dataclass
class FlowSet:
    """Flows of one seed. NVLink flows are GPU to GPU; network flows NIC to NIC; both map to a rate group."""

    nv_src: list[IntArray] = field(default_factory=list)
    nv_dst: list[IntArray] = field(default_factory=list)
    nv_group: list[IntArray] = field(default_factory=list)
    net_src: list[IntArray] = field(default_factory=list)
    net_dst: list[IntArray] = field(default_factory=list)
    net_key: list[IntArray] = field(default_factory=list)
    net_group: list[IntArray] = field(default_factory=list)
    group_bytes: list[FloatArray] = field(default_factory=list)
    group_coll: list[IntArray] = field(default_factory=list)
    n_groups: int = 0

    def new_groups(self, count: int, nbytes: FloatArray | float, coll: int) -> int:
        first = self.n_groups
        self.group_bytes.append(np.broadcast_to(np.asarray(nbytes, dtype=np.float64), (count,)).copy())
        self.group_coll.append(np.full(count, coll, dtype=np.int64))
        self.n_groups += count
        return first

    def add_nv(self, src: IntArray, dst: IntArray, group: IntArray) -> None:
        if src.size:
            self.nv_src.append(src)
            self.nv_dst.append(dst)
            self.nv_group.append(group)

    def add_net(self, src: IntArray, dst: IntArray, key: IntArray, group: IntArray) -> None:
        if src.size:
            self.net_src.append(src)
            self.net_dst.append(dst)
            self.net_key.append(key)
            self.net_group.append(group)


def _cat(parts: list[IntArray]) -> IntArray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Flows:
    nv_src: IntArray
    nv_dst: IntArray
    nv_group: IntArray
    net_src: IntArray
    net_dst: IntArray
    net_key: IntArray
    net_group: IntArray
    group_bytes: FloatArray
    group_coll: IntArray

    @property
    def n_groups(self) -> int:
        return int(self.group_bytes.size)


def finish(fs: FlowSet, qps: int) -> Flows:
    """Concatenate and split every rate group into ``qps`` queue pairs (each a sub-group with 1/qps of the bytes;
    network flows of QP ``j`` hash with key ``key * qps + j``)."""
    nv_src, nv_dst, nv_group = _cat(fs.nv_src), _cat(fs.nv_dst), _cat(fs.nv_group)
    net_src, net_dst, net_key, net_group = _cat(fs.net_src), _cat(fs.net_dst), _cat(fs.net_key), _cat(fs.net_group)
    gbytes = np.concatenate(fs.group_bytes) if fs.group_bytes else np.zeros(0)
    gcoll = _cat(fs.group_coll)
    if qps > 1:
        n = gbytes.size
        q = np.arange(qps, dtype=np.int64)
        nv_src, nv_dst = np.repeat(nv_src, qps), np.repeat(nv_dst, qps)
        nv_group = (np.repeat(nv_group, qps) + np.tile(q, nv_group.size) * n)
        net_src, net_dst = np.repeat(net_src, qps), np.repeat(net_dst, qps)
        net_key = np.repeat(net_key, qps) * qps + np.tile(q, net_key.size)
        net_group = np.repeat(net_group, qps) + np.tile(q, net_group.size) * n
        gbytes = np.tile(gbytes / qps, qps)
        gcoll = np.tile(gcoll, qps)
    if nv_src.size + net_src.size > MAX_FLOWS:
        raise ScenarioError("traffic", f"{nv_src.size + net_src.size:,} flows per seed exceed the simulator's "
                                       f"limit of {MAX_FLOWS:,}; simulate smaller groups (group='ep', 'dp') or fewer QPs")
    return Flows(nv_src, nv_dst, nv_group, net_src, net_dst, net_key, net_group, gbytes, gcoll)


# --------------------------------------------------------------------------------------------- segments


@dataclass(frozen=True)
class Segments:
    """Each group's GPUs sorted and cut into NVLink-domain segments (vectorised over all groups)."""

    gpus: IntArray  # flat, group-major, sorted inside each group
    seg: IntArray  # segment of each element
    start: IntArray  # first element of each segment
    count: IntArray  # elements per segment
    seg_group: IntArray  # group of each segment
    next_seg: IntArray  # the following segment of the same group (cyclic)
    group_segs: IntArray  # segments per group (per segment's group)
    pos: IntArray  # position of each element inside its segment


def segments(net: Network, members: IntArray) -> Segments:
    ng, size = members.shape
    g = np.sort(members, axis=1).ravel()
    grp = np.repeat(np.arange(ng, dtype=np.int64), size)
    dom = net.domain_of_gpu(g)
    new = np.ones(g.size, dtype=bool)
    new[1:] = (dom[1:] != dom[:-1]) | (grp[1:] != grp[:-1])
    seg = np.cumsum(new) - 1
    start = np.flatnonzero(new)
    count = np.diff(np.append(start, g.size))
    seg_group = grp[start]
    per_group = np.bincount(seg_group, minlength=ng)
    first_of_group = np.concatenate([[0], np.cumsum(per_group)[:-1]])
    nxt = np.arange(start.size, dtype=np.int64) + 1
    last = first_of_group[seg_group] + per_group[seg_group] - 1
    nxt = np.where(np.arange(start.size) == last, first_of_group[seg_group], nxt)
    return Segments(g, seg, start, count, seg_group, nxt, per_group[seg_group], np.arange(g.size) - start[seg])


def _same_rail_nic(net: Network, src_gpu: IntArray, dst_gpu: IntArray) -> tuple[IntArray, IntArray]:
    src_nic = net.nic_of_gpu(src_gpu)
    dst_node = dst_gpu // net.gpus_per_node
    return src_nic, dst_node * net.nics_per_node + src_nic % net.nics_per_node


def _hop(net: Network, fs: FlowSet, src: IntArray, dst: IntArray, key: IntArray, group: IntArray,
         rail_aligned: bool) -> None:
    """GPU-to-GPU transfers: NVLink inside a domain, the network otherwise."""
    same = net.domain_of_gpu(src) == net.domain_of_gpu(dst)
    fs.add_nv(src[same], dst[same], group[same])
    x = ~same
    if rail_aligned:
        a, b = _same_rail_nic(net, src[x], dst[x])
    else:
        a, b = net.nic_of_gpu(src[x]), net.nic_of_gpu(dst[x])
    fs.add_net(a, b, key[x], group[x])


# --------------------------------------------------------------------------------------------- generators


def ring(net: Network, fs: FlowSet, members: IntArray, channels: int, rail_aligned: bool, coll: int) -> None:
    sg = segments(net, members)
    ng = members.shape[0]
    m = sg.count[sg.seg]
    multi = sg.group_segs[sg.seg] > 1
    for c in range(channels):
        g0 = fs.new_groups(ng, 1.0 / channels, coll)
        p = c % sg.count  # per segment
        first = sg.start + p
        last = sg.start + (p - 1) % sg.count
        # NVLink: element -> next element of the segment (cyclic); the closing hop exists inside a single-domain
        # ring and, rail-aligned, as the PXN hop to the NIC's GPU
        nv = m > 1
        if not rail_aligned:
            nv &= ~(multi & (np.arange(sg.gpus.size) == last[sg.seg]))
        e = np.flatnonzero(nv)
        dst_e = sg.start[sg.seg[e]] + (sg.pos[e] + 1) % m[e]
        fs.add_nv(sg.gpus[e], sg.gpus[dst_e], g0 + sg.seg_group[sg.seg[e]])
        s = np.flatnonzero(sg.group_segs > 1)
        if s.size:
            src_el = first[s] if rail_aligned else last[s]
            dst_el = first[sg.next_seg[s]]
            a, b = sg.gpus[src_el], sg.gpus[dst_el]
            if rail_aligned:
                na, nb = _same_rail_nic(net, a, b)
            else:
                na, nb = net.nic_of_gpu(a), net.nic_of_gpu(b)
            fs.add_net(na, nb, np.full(s.size, c, dtype=np.int64), g0 + sg.seg_group[s])


def tree(net: Network, fs: FlowSet, members: IntArray, channels: int, coll: int) -> None:
    sg = segments(net, members)
    ng = members.shape[0]
    first_of_group = np.concatenate([[0], np.cumsum(np.bincount(sg.seg_group, minlength=ng))[:-1]])
    seg_rank = np.arange(sg.start.size) - first_of_group[sg.seg_group]  # position of the segment in its group
    nseg = sg.group_segs
    m = sg.count[sg.seg]
    for c in range(channels):
        g0 = fs.new_groups(ng, 1.0 / channels, coll)
        # chain inside each domain, both directions (reduce up, broadcast down)
        e = np.flatnonzero(sg.pos < m - 1)
        a, b = sg.gpus[e], sg.gpus[e + 1]
        grp = g0 + sg.seg_group[sg.seg[e]]
        fs.add_nv(np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([grp, grp]))
        # binary tree over the segments: heap order, mirrored (last segment at the root) for odd channels
        tpos = seg_rank if c % 2 == 0 else nseg - 1 - seg_rank
        child = np.flatnonzero((tpos > 0) & (nseg > 1))
        ppos = (tpos[child] - 1) // 2
        parent_rank = ppos if c % 2 == 0 else nseg[child] - 1 - ppos
        parent = first_of_group[sg.seg_group[child]] + parent_rank
        rail = c % net.nics_per_node
        a = sg.gpus[sg.start[child] + rail % sg.count[child]]
        b = sg.gpus[sg.start[parent] + rail % sg.count[parent]]
        na, nb = _same_rail_nic(net, a, b)
        key = np.full(child.size, c, dtype=np.int64)
        grp = g0 + sg.seg_group[child]
        fs.add_net(np.concatenate([na, nb]), np.concatenate([nb, na]), np.concatenate([key, key]),
                   np.concatenate([grp, grp]))


def all_to_all(net: Network, fs: FlowSet, members: IntArray, coll: int) -> None:
    """Per-node-deduplicated all-to-all: each GPU sends once per remote domain, NVLink forwards."""
    sg = segments(net, members)
    ng, size = members.shape
    nseg = sg.start.size
    # network: element e -> every other segment of its group
    gstart = np.concatenate([[0], np.cumsum(np.bincount(sg.seg_group, minlength=ng))[:-1]])
    per = sg.group_segs[sg.seg]  # segments in e's group
    reps = np.maximum(per - 1, 0)
    e = np.repeat(np.arange(sg.gpus.size), reps)
    k = np.arange(e.size) - np.repeat(np.cumsum(reps) - reps, reps)  # 0 .. per-2
    own = sg.seg[e] - gstart[sg.seg_group[sg.seg[e]]]
    other = np.where(k >= own, k + 1, k)
    dseg = gstart[sg.seg_group[sg.seg[e]]] + other
    land = sg.start[dseg] + sg.pos[e] % sg.count[dseg]
    nbytes = sg.count[dseg].astype(np.float64) / size
    g0 = fs.new_groups(e.size, nbytes, coll)
    na, nb = _same_rail_nic(net, sg.gpus[e], sg.gpus[land])
    fs.add_net(na, nb, k, g0 + np.arange(e.size))
    # NVLink: every ordered pair inside a segment carries its own share plus the forwarded remote share
    m = sg.count
    src_el = np.repeat(np.arange(sg.gpus.size), m[sg.seg])
    off = np.arange(src_el.size) - np.repeat(np.cumsum(m[sg.seg]) - m[sg.seg], m[sg.seg])
    dst_el = sg.start[sg.seg[src_el]] + off
    keep = dst_el != src_el
    src_el, dst_el = src_el[keep], dst_el[keep]
    remote = sg.group_segs[sg.seg[src_el]] - 1
    nbytes_nv = (1.0 + remote) / size
    g1 = fs.new_groups(src_el.size, nbytes_nv, coll)
    fs.add_nv(sg.gpus[src_el], sg.gpus[dst_el], g1 + np.arange(src_el.size))
    del nseg


def sendrecv(net: Network, fs: FlowSet, members: IntArray, coll: int) -> None:
    """Pipeline stages: s -> s+1 and s+1 -> s for every group (one rate group per transfer)."""
    if members.shape[1] < 2:
        return
    a = members[:, :-1].ravel()
    b = members[:, 1:].ravel()
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    g0 = fs.new_groups(src.size, 1.0, coll)
    _hop(net, fs, src, dst, np.zeros(src.size, dtype=np.int64), g0 + np.arange(src.size), True)


def node_permutation(net: Network, fs: FlowSet, gpus: IntArray, rng: np.random.Generator, coll: int,
                     rail_aligned: bool) -> None:
    """A random derangement of the nodes of ``gpus`` (whole nodes): GPU i of node n -> GPU i' of node pi(n)."""
    nodes = np.unique(gpus // net.gpus_per_node)
    if nodes.size < 2:
        return
    order = rng.permutation(nodes)
    partner = np.zeros(net.nodes, dtype=np.int64)
    partner[order] = np.roll(order, -1)
    dst_node = partner[gpus // net.gpus_per_node]
    local = gpus % net.gpus_per_node
    dst_local = local if rail_aligned else rng.permutation(net.gpus_per_node)[local]
    dst = dst_node * net.gpus_per_node + dst_local
    g0 = fs.new_groups(gpus.size, 1.0, coll)
    _hop(net, fs, gpus, dst, np.zeros(gpus.size, dtype=np.int64), g0 + np.arange(gpus.size), rail_aligned)


def shift(net: Network, fs: FlowSet, gpus: IntArray, by: int, coll: int) -> None:
    dst = np.roll(gpus, -by)
    g0 = fs.new_groups(gpus.size, 1.0, coll)
    _hop(net, fs, gpus, dst, np.zeros(gpus.size, dtype=np.int64), g0 + np.arange(gpus.size), True)


def leaf_nodes(net: Network) -> int:
    """Nodes to shift by so that every NIC lands on another leaf: a leaf's NICs span this many nodes (rounded up)."""
    if net.tiers == 1:
        return net.nodes
    per = net.leaf_down if net.rails > 1 else -(-net.leaf_down // max(1, net.nics_per_plane_node))
    return max(1, per)
