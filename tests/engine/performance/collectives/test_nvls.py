"""NVLS (collectives/nvls.py): the all-reduce ring at the NVSwitch's reduction bandwidth, where the GPU has it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.nvls import nvls_applies
from engine.performance.collectives.tuning import collective_time
from tests.engine.performance.collectives._net import NET, NO_NVLS, NVLINK_HOP, PROTOCOLS


@pytest.mark.parametrize(("net", "bus_bw"), [(NET, 480e9), (NO_NVLS, 360e9)])
def test_all_reduce_in_a_node_uses_the_switch_reduction_bandwidth(net, bus_bw: float) -> None:
    n, nbytes = 8, 1e9
    expected = min(base + 2 * (n - 1) * (NVLINK_HOP + nvl) + 2 * (n - 1) / n * nbytes / bus_bw / eff
                   for eff, base, _, nvl in PROTOCOLS)
    t = collective_time(net, CollectiveKind.ALL_REDUCE, np.array([nbytes]), np.array([8.0]), np.array([1.0]))
    assert t[0] == pytest.approx(expected, rel=1e-12)


def test_nvls_only_reduces() -> None:
    assert nvls_applies(NET, CollectiveKind.ALL_REDUCE)
    assert not nvls_applies(NET, CollectiveKind.ALL_GATHER) and not nvls_applies(NO_NVLS, CollectiveKind.ALL_REDUCE)
