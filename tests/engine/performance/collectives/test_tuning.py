"""NCCL's choice (collectives/tuning.py): the cheapest algorithm for the collective's kind."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.collectives.bus import make_bus
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.nvls import nvls_time
from engine.performance.collectives.placement import place
from engine.performance.collectives.tree import tree_time
from engine.performance.collectives.tuning import collective_time
from tests.engine.performance.collectives._net import NET


@pytest.mark.parametrize("nbytes", [1e3, 1e9])
def test_all_reduce_across_nodes_is_the_cheaper_of_nvls_ring_and_tree(nbytes: float) -> None:
    n = np.array([32.0])
    bus = make_bus(NET, CollectiveKind.ALL_REDUCE, np.array([nbytes]), n, place(NET, n, np.array([1.0])))
    best = min(float(nvls_time(bus)[0]), float(tree_time(bus)[0]))
    t = collective_time(NET, CollectiveKind.ALL_REDUCE, np.array([nbytes]), n, np.array([1.0]))
    assert t[0] == best


def test_one_rank_no_time() -> None:
    for kind in (CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.ALL_TO_ALL):
        assert collective_time(NET, kind, np.array([1e9]), np.array([1.0]), np.array([1.0]))[0] == 0.0
