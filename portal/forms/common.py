"""Shared pieces of the portal forms: choices and limits (from the engine's one declaration of the scenario
document: engine.schema.fields, .enums, .bounds), field-error mapping."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from engine.schema.bounds import bound_for
from engine.schema.enums import (
    ActivationCache,
    CpCommType,
    Distribution,
    Fabric,
    Framework,
    MoeDispatcher,
    OptimizerMoments,
    Precision,
    RankAssignment,
    Recompute,
    Routing,
    TopologyKind,
)
from engine.schema.fields import AUTO, BY_PATH

LINK_SPEEDS = [(200, "200G"), (400, "400G"), (800, "800G")]
# Values and labels are the engine's enums (one definition each, engine.schema.enums); only the "auto" / empty
# options' wording is the form's.
FABRIC_CHOICES = Fabric.choices()
TOPOLOGY_CHOICES = TopologyKind.choices()
#: "" = the fabric's default (adaptive on InfiniBand, ECMP on RoCE), i.e. no cluster.routing written
ROUTING_CHOICES = [("", "Fabric default"), *Routing.choices()]
FRAMEWORK_CHOICES = [(AUTO, "Auto (by layout)"), *Framework.choices()]
RANK_ASSIGNMENT_CHOICES = RankAssignment.choices()
DISPATCHER_CHOICES = [(AUTO, "Default"), *MoeDispatcher.choices()]
PRECISION_CHOICES = Precision.choices()
RECOMPUTE_CHOICES = [(AUTO, "Auto"), *Recompute.choices()]
#: "" = the engine's default (bf16 activations, fp32 moments), i.e. no training key written
ACTIVATION_CACHE_CHOICES = [
    ("", f"Default ({ActivationCache.label(BY_PATH['training.activation_cache'].default)})"), *ActivationCache.choices()]
CP_COMM_TYPE_CHOICES = [
    ("", f"Default ({CpCommType.label(BY_PATH['training.cp_comm_type'].default)})"), *CpCommType.choices()]
OPTIMIZER_MOMENTS_CHOICES = [
    ("", f"Default ({OptimizerMoments.label(BY_PATH['training.optimizer_moments'].default)})"),
    *OptimizerMoments.choices()]
COST_FIELDS = ("usd_per_kwh", "pue", "depreciation_years", "avg_utilization")
PAR_MODE_CHOICES = [("auto", "Search automatically"), ("manual", "Set the degrees")]
DISTRIBUTION_CHOICES = Distribution.choices()
#: cluster fields a fleet supplies (shown read-only when a fleet is picked)
FLEET_CLUSTER_FIELDS = ("gpu", "gpus", "gpus_per_node", "nics_per_node", "nic_gbps", "fabric", "topology",
                        "oversubscription")
#: (form field, costs path, likely when the scenario has no value) of the ranged cost inputs
RANGE_INPUTS = (
    ("usd_per_kwh", ("usd_per_kwh",), None),
    ("pue", ("pue",), None),
    ("failure_rate_scale", ("goodput", "failure_rate_scale"), 1.0),
)


def limits(path: str, scale: float = 1.0) -> dict[str, Any]:
    """``min_value`` / ``max_value`` of a number input for the field ``path``, from the one bounds
    table (in the input's unit: the document's value / ``scale``). An open lower end (``> 0``) sets no minimum:
    the engine refuses it, naming the field."""
    bound = bound_for(path)
    if bound is None:
        return {}
    out: dict[str, Any] = {"max_value": bound.hi / scale}
    if not bound.lo_open:
        out["min_value"] = bound.lo / scale
    return out


def _help(path: str) -> str:
    declared = BY_PATH.get(path)
    return declared.help if declared is not None else ""


def int_input(path: str, **kwargs: Any) -> forms.IntegerField:
    """An integer input for the field ``path``: its bound (and, for a document field, its help) from the engine."""
    kwargs.setdefault("help_text", _help(path))
    kwargs.update({k: int(v) for k, v in limits(path).items()})
    return forms.IntegerField(**kwargs)


def number_input(path: str, scale: float = 1.0, **kwargs: Any) -> forms.FloatField:
    """A number input for the field ``path`` (``scale``: document units per input unit)."""
    kwargs.setdefault("help_text", _help(path))
    kwargs.update(limits(path, scale))
    return forms.FloatField(**kwargs)


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


def gpu_nic_speeds(catalog: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """GPU key -> its default NIC speed per GPU, the catalog's ``specs.default_nic_gbps`` (what the engine's parser
    takes when a document gives no ``cluster.nic_gbps``: 800 for GB300)."""
    out: dict[str, int] = {}
    for key, item in catalog.items():
        speed = (item.get("specs") or {}).get("default_nic_gbps") if item.get("kind") == "gpu" else None
        if isinstance(speed, int | float) and not isinstance(speed, bool):
            out[str(key)] = int(speed)
    return out


def nic_gbps_of(cluster: Mapping[str, Any], catalog: Mapping[str, Mapping[str, Any]] | None) -> int | None:
    """A cluster section's link speed; none given: its GPU's catalog default (as the engine reads it), else None."""
    if isinstance(cluster.get("nic_gbps"), int | float) and not isinstance(cluster.get("nic_gbps"), bool):
        return int(cluster["nic_gbps"])
    return gpu_nic_speeds(catalog or {}).get(str(cluster.get("gpu")))


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
