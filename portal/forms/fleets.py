"""The fleet form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from portal.forms.common import (
    FABRIC_CHOICES,
    LINK_SPEEDS,
    TOPOLOGY_CHOICES,
    FieldErrorMixin,
    _catalog_choices,
)


class FleetForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120)
    site = forms.CharField(max_length=120, required=False)
    server_model = forms.ChoiceField(label="Server model")
    server_count = forms.IntegerField(min_value=1, label="Servers")
    gpus_per_node = forms.IntegerField(min_value=1, initial=8, label="GPUs per server")
    nics_per_node = forms.IntegerField(min_value=1, initial=8, label="NICs per server")
    nic_gbps = forms.TypedChoiceField(choices=LINK_SPEEDS, coerce=int, initial=400, label="Link speed")
    fabric = forms.ChoiceField(choices=FABRIC_CHOICES, initial="infiniband")
    topology = forms.ChoiceField(choices=TOPOLOGY_CHOICES, initial="fat-tree")
    oversubscription = forms.FloatField(min_value=1.0, initial=1.0)
    in_service_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}),
                                      label="In service from")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))

    FIELDS = ("name", "site", "server_model", "server_count", "gpus_per_node", "nics_per_node", "nic_gbps",
              "fabric", "topology", "oversubscription", "in_service_date", "notes")

    def __init__(self, *args: Any, catalog_items: Iterable[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        servers = _catalog_choices(catalog_items, "server")
        current = self.initial.get("server_model")
        if current and current not in dict(servers):
            servers.append((current, current))
        self._choice("server_model").choices = servers or [("HGX-H100", "HGX H100 8-GPU server")]
        for f in self.fields.values():
            if isinstance(f.widget, forms.NumberInput):
                f.widget.attrs.setdefault("step", "any")

    def data_for_service(self) -> dict[str, Any]:
        return {k: self.cleaned_data.get(k) for k in self.FIELDS}
