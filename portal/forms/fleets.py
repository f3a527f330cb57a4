"""The fleet form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from engine.schema.fields import field
from portal.forms.common import (
    FABRIC_CHOICES,
    LINK_SPEEDS,
    TOPOLOGY_CHOICES,
    FieldErrorMixin,
    _catalog_choices,
    int_input,
    number_input,
)


class FleetForm(FieldErrorMixin, forms.Form):
    name = forms.CharField(max_length=120)
    site = forms.CharField(max_length=120, required=False)
    server_model = forms.ChoiceField(label="Server model")
    # a fleet becomes a cluster section: its numbers share the scenario's bounds (planning.services.fleets)
    server_count = int_input("fleet.server_count", label="Servers")
    gpus_per_node = int_input("cluster.gpus_per_node", initial=8, label="GPUs per server")
    nics_per_node = int_input("cluster.nics_per_node", initial=8, label="NICs per server")
    nic_gbps = forms.TypedChoiceField(choices=LINK_SPEEDS, coerce=int, initial=400, label="Link speed")
    fabric = forms.ChoiceField(choices=FABRIC_CHOICES, initial=field("cluster.fabric").default)
    topology = forms.ChoiceField(choices=TOPOLOGY_CHOICES, initial=field("cluster.topology").default)
    oversubscription = number_input("cluster.oversubscription", initial=field("cluster.oversubscription").default)
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
