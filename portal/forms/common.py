"""Shared pieces of the portal forms: choices (values are the engine's enums), field-error mapping."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from engine.schema.types import FABRICS, FRAMEWORKS, MOE_DISPATCHERS, ROUTINGS, TOPOLOGIES

LINK_SPEEDS = [(200, "200G"), (400, "400G"), (800, "800G")]
# The values are the engine's enums (one definition, engine.document.parse); only the labels live here.
FABRIC_LABELS = {"infiniband": "InfiniBand", "roce": "Ethernet (RoCE)"}
FABRIC_CHOICES = [(f, FABRIC_LABELS.get(f, f)) for f in FABRICS]
TOPOLOGY_LABELS = {"fat-tree": "Fat-tree", "rail-optimized": "Rail-optimized", "multi-plane": "Multi-plane"}
TOPOLOGY_CHOICES = [(t, TOPOLOGY_LABELS.get(t, t)) for t in TOPOLOGIES]
ROUTING_LABELS = {"ecmp": "ECMP (static hash, one QP per connection)", "ecmp-qp": "ECMP with more QPs per connection",
                  "adaptive": "Adaptive routing (IB AR, Spectrum-X)", "pinned": "Pinned routes"}
#: "" = the fabric's default (adaptive on InfiniBand, ECMP on RoCE), i.e. no cluster.routing written
ROUTING_CHOICES = [("", "Fabric default")] + [(r, ROUTING_LABELS.get(r, r)) for r in ROUTINGS]
FRAMEWORK_LABELS = {"megatron-core": "Megatron-Core", "nemo": "NeMo", "deepspeed": "DeepSpeed", "fsdp": "PyTorch FSDP",
                    "fsdp2": "PyTorch FSDP2"}
FRAMEWORK_CHOICES = [("auto", "Auto (by layout)")] + [(f, FRAMEWORK_LABELS.get(f, f)) for f in FRAMEWORKS]
DISPATCHER_LABELS = {"alltoall": "All-to-all", "allgather": "All-gather over TP × EP"}
DISPATCHER_CHOICES = [("auto", "Default")] + [(d, DISPATCHER_LABELS.get(d, d)) for d in MOE_DISPATCHERS]
PRECISION_CHOICES = [("bf16", "BF16"), ("fp8", "FP8")]
RECOMPUTE_CHOICES = [("auto", "Auto"), ("none", "None"), ("selective", "Selective"), ("full", "Full")]
COST_FIELDS = ("usd_per_kwh", "pue", "depreciation_years", "avg_utilization")
PAR_MODE_CHOICES = [("auto", "Search automatically"), ("manual", "Set the degrees")]
DISTRIBUTION_CHOICES = [("triangular", "Triangular"), ("pert", "PERT (weights the likely value more)")]
#: cluster fields a fleet supplies (shown read-only when a fleet is picked)
FLEET_CLUSTER_FIELDS = ("gpu", "gpus", "gpus_per_node", "nics_per_node", "nic_gbps", "fabric", "topology",
                        "oversubscription")
#: servers in one scalable unit: the default non-blocking pod when the fabric is oversubscribed
SCALABLE_UNIT_NODES = 32
#: (form field, costs path, likely when the scenario has no value) of the ranged cost inputs
RANGE_INPUTS = (
    ("usd_per_kwh", ("usd_per_kwh",), None),
    ("pue", ("pue",), None),
    ("failure_rate_scale", ("goodput", "failure_rate_scale"), 1.0),
)


def default_pod_gpus(gpus: int | None, gpus_per_node: int | None) -> int | None:
    """One scalable unit (32 servers), capped at the cluster size."""
    if not gpus or not gpus_per_node:
        return None
    return min(int(gpus), SCALABLE_UNIT_NODES * int(gpus_per_node))


def _range_value(value: Any) -> tuple[float | None, float | None, float | None]:
    """(low, likely, high) of a number or a {low, likely, high} range."""
    if isinstance(value, Mapping) and "low" in value and "high" in value:
        low, high = value.get("low"), value.get("high")
        likely = value.get("likely")
        if likely is None and isinstance(low, int | float) and isinstance(high, int | float):
            likely = (low + high) / 2
        return low, likely, high
    if isinstance(value, int | float) and not isinstance(value, bool):
        return None, value, None
    return None, None, None


def _catalog_choices(items: Iterable[Mapping[str, Any]], kind: str) -> list[tuple[str, str]]:
    return sorted(((i["key"], i.get("name") or i["key"]) for i in items if i.get("kind") == kind), key=lambda c: c[1])


class FieldErrorMixin:
    """Map dotted error paths from the engine/services/serializers onto form fields."""

    def _choice(self, name: str) -> forms.ChoiceField:
        field = self.fields[name]  # type: ignore[attr-defined]
        assert isinstance(field, forms.ChoiceField)
        return field

    #: document path -> form field name
    PATHS: dict[str, str] = {}

    def add_path_errors(self, errors: Mapping[str, Any]) -> None:
        form: forms.BaseForm = self  # type: ignore[assignment]
        for path, messages in errors.items():
            if isinstance(messages, str):
                messages = [messages]
            field = self.PATHS.get(path)
            if field is None and path in form.fields:
                field = path
            if field is None:
                # nearest known ancestor path (cluster.gpus.0 -> cluster.gpus)
                parts = path.split(".")
                while parts and field is None:
                    parts.pop()
                    field = self.PATHS.get(".".join(parts))
            for msg in messages if isinstance(messages, list | tuple) else [messages]:
                text = str(msg)
                if field and field in form.fields:
                    form.add_error(field, text)
                else:
                    label = "" if path in ("detail", "non_field_errors", "__all__", "") else f"{path}: "
                    form.add_error(None, f"{label}{text}")
