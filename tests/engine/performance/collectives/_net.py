"""A small cluster for the collective tests, and NCCL's protocol figures written out (docs/performance-model.md s.3)."""

from __future__ import annotations

import dataclasses

from engine.performance.collectives.placement import Net

# (bandwidth fraction, base latency, extra per network hop, extra per NVLink hop) of LL, LL128, Simple
PROTOCOLS = [(0.50, 5.0e-6, 0.0, 0.0), (0.94, 8.0e-6, 0.5e-6, 0.3e-6), (1.00, 9.0e-6, 2.0e-6, 1.5e-6)]
NVLINK_HOP = 1.0e-6
IB_HOP_1_SWITCH = 2.35e-6 + 0.45e-6

# 8-GPU nodes, 4 nodes under a leaf, 2 tiers, non-blocking, adaptive routing (share 1 below full load)
NET = Net(domain=8.0, job_nodes=64.0, leaf_nodes=4.0, pod_nodes=64.0, oversub_leaf=1.0, oversub_spine=1.0,
          tiers=2.0, fabric="infiniband", routing="adaptive", qps=1.0, nic_bw_gpu=25e9, nvl_ring=360e9,
          nvl_ar=480e9, nvls=True)
NO_NVLS = dataclasses.replace(NET, nvl_ar=360e9, nvls=False)
SHARP = dataclasses.replace(NET, sharp=True)
