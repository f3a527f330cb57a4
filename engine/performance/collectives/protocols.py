"""NCCL's three protocols: what fraction of the link rate each carries and what latency each adds.

LL (8-byte stores carrying 4 bytes of data and a 4-byte flag: 50% of bandwidth, lowest latency), LL128 (120 of
128 bytes: 94%), Simple (full rate, fence-based synchronisation, about 6 us per sync point: "Demystifying NCCL",
arXiv 2507.04786). Base latencies are of the order of NCCL's own tuning table (src/graph/tuning.cc, 4-12 us
per collective). With the placement's hop latencies they give: small-message all-reduce 19 us on 8 H100 (one
node), 24 us on 2 nodes, 48 us on 16 nodes, 70 us on 128 nodes; large messages reach the measured bus
bandwidths (480 GB/s NVLS in a node, 8 x 47.5 GB/s across NDR nodes: nccl-tests #212, #290).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class NcclProtocol:
    name: str
    bw_fraction: float  # fraction of the link bandwidth that carries data
    base_s: float  # fixed launch / synchronisation latency per collective [s]
    net_hop_s: float  # extra latency per network hop [s]
    nvlink_hop_s: float  # extra latency per NVLink hop [s]


LL = NcclProtocol(name="LL", bw_fraction=0.50, base_s=5.0e-6, net_hop_s=0.0, nvlink_hop_s=0.0)
LL128 = NcclProtocol(name="LL128", bw_fraction=0.94, base_s=8.0e-6, net_hop_s=0.5e-6, nvlink_hop_s=0.3e-6)
SIMPLE = NcclProtocol(name="Simple", bw_fraction=1.00, base_s=9.0e-6, net_hop_s=2.0e-6, nvlink_hop_s=1.5e-6)
PROTOCOLS = (LL, LL128, SIMPLE)
