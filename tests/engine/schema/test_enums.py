"""The scenario document's enums: one ChoiceSet each (value, label), stored values unchanged."""

from __future__ import annotations

import pytest

from engine.schema import enums
from engine.schema.enums import CHOICE_SETS, DEFAULT_QPS, ChoiceSet, Fabric, Routing

# the strings stored in documents and in the database: changing one breaks every stored scenario
STORED = {
    "fabric": ("infiniband", "roce"),
    "topology": ("fat-tree", "rail-optimized", "multi-plane"),
    "routing": ("ecmp", "ecmp-qp", "adaptive", "pinned"),
    "framework": ("megatron-core", "nemo", "deepspeed", "fsdp", "fsdp2"),
    "precision": ("bf16", "fp8", "mxfp8", "nvfp4"),
    "attention": ("flash", "native", "unfused"),
    "recompute": ("none", "selective", "full"),
    "moe_dispatcher": ("alltoall", "allgather"),
    "expert_kernel": ("warp-mma", "native"),
    "leaf_placement": ("auto", "rack", "row"),
    "facility_mode": ("colocation", "owned"),
    "distribution": ("triangular", "pert"),
    "dp_placement": ("inner", "outer"),
}


@pytest.mark.parametrize("name", sorted(STORED))
def test_stored_values_are_unchanged_and_labelled(name: str) -> None:
    choice_set = CHOICE_SETS[name]
    assert choice_set.values() == STORED[name]
    labels = [label for _, label in choice_set.CHOICES]
    assert all(labels) and len(set(labels)) == len(labels)
    # the class attributes are the values (NetBox ChoiceSet style)
    attrs = {v for k, v in vars(choice_set).items() if k.isupper() and k != "CHOICES"}
    assert attrs == set(STORED[name])


def test_every_choice_set_is_registered() -> None:
    defined = {c for c in vars(enums).values()
               if isinstance(c, type) and issubclass(c, ChoiceSet) and c is not ChoiceSet}
    assert defined == set(CHOICE_SETS.values())


def test_labels() -> None:
    assert Fabric.INFINIBAND == "infiniband" and Fabric.label(Fabric.INFINIBAND) == "InfiniBand"
    assert Fabric.label("roce") == "Ethernet (RoCE)"
    assert Fabric.label("ethernet") == "ethernet" and Fabric.label(None) == ""  # unknown values show as they are
    assert Fabric.choices() == [("infiniband", "InfiniBand"), ("roce", "Ethernet (RoCE)")]


def test_default_qps_once_as_integers_for_every_routing_mode() -> None:
    from engine.fabric import routing

    assert set(DEFAULT_QPS) == set(Routing.values())
    assert all(isinstance(v, int) for v in DEFAULT_QPS.values()) and DEFAULT_QPS[Routing.ECMP_QP] == 4
    # the routing model uses the schema's table, and keeps no routing-mode list of its own
    assert routing.DEFAULT_QPS is DEFAULT_QPS and not hasattr(routing, "ROUTINGS")
