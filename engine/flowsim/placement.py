"""Placement of a job's ranks on the cluster, and its parallel groups.

* ``packed``: nodes ``0 .. n-1`` (contiguous, leaf-aligned: the scheduler's best case);
* ``random``: ``n`` nodes drawn uniformly from the cluster (a busy fleet, no topology awareness);
* ``fragmented``: a fraction of nodes is already taken (drawn at random); the job gets the lowest free nodes
  (first fit), so it lands on the holes.

Ranks fill the job's nodes in node order (the scheduler's host list is sorted), GPUs in local order. The rank
layout follows the performance model: TP innermost, then CP, DP, PP; expert-parallel groups are ``ep``
consecutive ranks of the combined (DP, CP) index, as in Megatron-Core, or with MoE parallel folding
(``parallelism.etp``) ``ep`` ranks strided by etp inside a stage's TP x CP x DP ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.errors import ScenarioError
from engine.flowsim.network import IntArray, Network

JOB_PLACEMENTS = ("packed", "random", "fragmented")
GROUPS = ("all", "tp", "cp", "dp", "pp", "ep")


@dataclass(frozen=True)
class Layout:
    """Parallel degrees of the simulated job (their product is the rank count; ``ep`` divides ``dp*cp``, or with MoE
    parallel folding ``etp*ep`` divides ``tp*cp*dp``)."""

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int
    etp: int | None = None  # expert tensor-parallel degree (parallelism.etp); None = tp (no folding)

    @property
    def folded(self) -> bool:
        return self.etp is not None and self.etp != self.tp

    @property
    def ranks(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def groups(self, name: str) -> IntArray:
        """Rank indices of every group of kind ``name``, one row per group, in rank order."""
        r = np.arange(self.ranks, dtype=np.int64).reshape(self.pp, self.dp, self.cp, self.tp)
        if name == "all":
            return r.reshape(1, -1)
        if name == "tp":
            return r.reshape(-1, self.tp)
        if name == "cp":
            return np.moveaxis(r, 2, 3).reshape(-1, self.cp)
        if name == "dp":
            return np.moveaxis(r, 1, 3).reshape(-1, self.dp)
        if name == "pp":
            return np.moveaxis(r, 0, 3).reshape(-1, self.pp)
        if name == "ep" and self.folded:
            # Megatron-Core's expert grid over a stage's t c d ranks: etp innermost, then ep, then edp, so an EP
            # group is ep ranks strided by etp (engine.performance.terms.groups, MoE parallel folding)
            etp = int(self.etp or self.tp)
            grid = r.reshape(self.pp, -1, self.ep, etp)
            return np.moveaxis(grid, 2, 3).reshape(-1, self.ep)
        if name == "ep":
            x = r.transpose(0, 3, 1, 2).reshape(self.pp, self.tp, self.dp * self.cp)
            return x.reshape(-1, self.ep)
        raise ScenarioError("group", f"must be one of {', '.join(GROUPS)}, got {name!r}")


def place_nodes(net: Network, nodes: int, placement: str, rng: np.random.Generator,
                fragmentation: float) -> IntArray:
    """Sorted node ids of the job."""
    if placement == "packed":
        return np.arange(nodes, dtype=np.int64)
    if placement == "random":
        return np.sort(rng.choice(net.nodes, size=nodes, replace=False)).astype(np.int64)
    if placement == "fragmented":
        taken = rng.random(net.nodes) < fragmentation
        free = np.flatnonzero(~taken)
        if free.size < nodes:  # a busier draw than the job fits: take back the last-taken nodes
            extra = np.flatnonzero(taken)[: nodes - free.size]
            free = np.sort(np.concatenate([free, extra]))
        return free[:nodes].astype(np.int64)
    raise ScenarioError("placement", f"must be one of {', '.join(JOB_PLACEMENTS)}, got {placement!r}")


def rank_gpus(net: Network, job_nodes: IntArray, ranks: int) -> IntArray:
    """GPU id of every rank (node-major over the job's nodes)."""
    gpus = (job_nodes[:, None] * net.gpus_per_node + np.arange(net.gpus_per_node)[None, :]).ravel()
    return gpus[:ranks]
