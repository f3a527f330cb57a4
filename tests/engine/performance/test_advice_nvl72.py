"""NVL72 jobs larger than one rack, whole racks or 64 of 72 per rack, parse and predict (issue #22, #24 item 3)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.cost.tco import tco
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import predict
from tests.engine.performance.test_rack_scale import gb300_dense


def _doc(gpus: int, gpu: str = "GB300") -> dict[str, Any]:
    d = gb300_dense()
    d["cluster"].update(gpu=gpu, gpus=gpus)
    d["training"]["global_batch"] = gpus  # dp = gpus / 8 divides it
    return d


@pytest.mark.parametrize(("gpus", "racks"), [(64, 1), (128, 2), (144, 2), (1152, 16), (1792, 25), (2048, 29),
                                             (2304, 32)])
def test_any_gpu_count_fills_whole_racks_and_one_partial(gpus: int, racks: int) -> None:
    s = parse_scenario(_doc(gpus))
    assert s.cluster.gpus == gpus and s.cluster.gpus_per_node == 72
    assert s.topo.nodes == racks == -(-gpus // 72)  # ceil(gpus / 72): the last rack partial
    assert s.topo.nvlink_domain_gpus == min(72, gpus)
    r = predict(_doc(gpus))
    assert r.fits and r.mfu is not None and r.mfu > 0.1 and r.gpus == gpus


def test_two_racks_of_64_are_priced_as_two_racks_with_128_nics() -> None:
    out = tco(copy.deepcopy(_doc(128)))
    rack = next(li for li in out["tco"]["line_items"] if "GB300-NVL72" in li["item"])
    nic = next(li for li in out["tco"]["line_items"] if li["item"].startswith("Compute NIC"))
    assert rack["quantity"] == 2 and nic["quantity"] == 128  # cabled NICs: the GPUs used, not 2 x 72


def test_hgx_servers_are_still_whole() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_doc(1004, "B300") | {"cluster": {"gpu": "B300", "gpus": 1004, "gpus_per_node": 8}})
    assert info.value.field == "cluster.gpus" and "multiple of cluster.gpus_per_node=8" in info.value.message
