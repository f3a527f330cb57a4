"""The sweep form: axes to vary over a scenario, and whether to include uncertainty."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from portal.forms.common import (
    FABRIC_CHOICES,
    LINK_SPEEDS,
    ROUTING_CHOICES,
    TOPOLOGY_CHOICES,
    FieldErrorMixin,
    _catalog_choices,
)


class SweepForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120, required=False)
    nic_gbps = forms.TypedMultipleChoiceField(choices=LINK_SPEEDS, coerce=int, required=False,
                                              widget=forms.CheckboxSelectMultiple, label="Link speeds")
    fabric = forms.MultipleChoiceField(choices=FABRIC_CHOICES, required=False,
                                       widget=forms.CheckboxSelectMultiple, label="Fabrics")
    routing = forms.MultipleChoiceField(choices=[c for c in ROUTING_CHOICES if c[0]], required=False,
                                        widget=forms.CheckboxSelectMultiple, label="Routing",
                                        help_text="Each must be one the fabric's switch supports (the catalog "
                                                  "says which); an unsupported pair is refused, named.")
    topology = forms.MultipleChoiceField(choices=TOPOLOGY_CHOICES, required=False,
                                         widget=forms.CheckboxSelectMultiple, label="Topologies")
    gpu = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label="GPU generations")
    gpus = forms.CharField(required=False, label="Cluster sizes (GPUs)",
                           help_text="Comma-separated, e.g. 1024, 2048, 4096")
    oversubscription = forms.CharField(required=False, label="Oversubscription ratios",
                                       help_text="Comma-separated, e.g. 1, 2")
    uncertainty = forms.BooleanField(required=False, initial=True,
                                     label="Include uncertainty (Monte Carlo P10/P50/P90 and sensitivity)",
                                     help_text="Each run page lists the ranges drawn; with none, it says P10 = P50 = P90.")

    MONTE_CARLO_SAMPLES = 2000

    def params(self) -> dict[str, Any]:
        if self.cleaned_data.get("uncertainty"):
            return {"monte_carlo": self.MONTE_CARLO_SAMPLES, "sensitivity": True}
        return {}

    PATHS = {
        "axes.cluster.nic_gbps": "nic_gbps", "axes.cluster.fabric": "fabric", "axes.cluster.gpu": "gpu",
        "axes.cluster.gpus": "gpus", "axes.cluster.oversubscription": "oversubscription",
        "axes.cluster.routing": "routing", "axes.cluster.topology": "topology",
        "cluster.routing": "routing", "cluster.topology": "topology", "cluster.tiers": "topology",
        "cluster.nic_gbps": "nic_gbps", "cluster.fabric": "fabric", "cluster.gpu": "gpu", "cluster.gpus": "gpus",
        "cluster.oversubscription": "oversubscription", "axes": None,  # type: ignore[dict-item]
    }

    def __init__(self, *args: Any, catalog_items: Iterable[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._choice("gpu").choices = _catalog_choices(catalog_items, "gpu")
        self.PATHS = {k: v for k, v in self.PATHS.items() if v}

    @staticmethod
    def _numbers(raw: str, field: str, cast: Any) -> list[Any]:
        out = []
        for part in (raw or "").replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            try:
                value = cast(part)
            except ValueError:
                raise forms.ValidationError(f"{part!r} is not a number.", code="invalid") from None
            out.append(value)
        return out

    def clean_gpus(self) -> list[int]:
        return self._numbers(self.cleaned_data.get("gpus", ""), "gpus", int)

    def clean_oversubscription(self) -> list[float]:
        return self._numbers(self.cleaned_data.get("oversubscription", ""), "oversubscription", float)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.errors and not self.axes():
            raise forms.ValidationError("Pick at least one value on at least one axis to sweep.")
        return data

    def axes(self) -> dict[str, list[Any]]:
        d = getattr(self, "cleaned_data", {})
        axes: dict[str, list[Any]] = {}
        for field, path in (("nic_gbps", "cluster.nic_gbps"), ("fabric", "cluster.fabric"), ("gpu", "cluster.gpu"),
                            ("gpus", "cluster.gpus"), ("oversubscription", "cluster.oversubscription"),
                            ("routing", "cluster.routing"), ("topology", "cluster.topology")):
            values = d.get(field) or []
            if values:
                axes[path] = list(values)
        return axes
