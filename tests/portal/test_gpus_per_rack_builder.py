"""The builder has no input for ``cluster.gpus_per_rack`` (set through the API or an imported document): saving the
scenario from the builder keeps it while the GPU and its rack size are unchanged, and drops it otherwise (an HGX
GPU would refuse it)."""

from __future__ import annotations

from typing import Any

from portal.forms.builder_sections import cluster_section

SHOWN: dict[str, Any] = {"gpu": "GB300", "gpus": 2048, "gpus_per_node": 72, "nics_per_node": 72, "nic_gbps": 800,
                         "fabric": "infiniband", "topology": "fat-tree", "oversubscription": 1.0, "routing": ""}
STORED: dict[str, Any] = {**{k: v for k, v in SHOWN.items() if k != "routing"}, "gpus_per_rack": 64}


def test_the_builder_keeps_gpus_per_rack_while_the_racks_are_the_same() -> None:
    kept = cluster_section({**SHOWN, "gpus": 1024}, STORED, fleet_picked=False, same_fleet=True)
    assert kept["gpus_per_rack"] == 64 and kept["gpus"] == 1024


def test_the_builder_drops_gpus_per_rack_with_another_gpu() -> None:
    hgx = {**SHOWN, "gpu": "B300", "gpus_per_node": 8, "nics_per_node": 8}
    assert "gpus_per_rack" not in cluster_section(hgx, STORED, fleet_picked=False, same_fleet=True)
