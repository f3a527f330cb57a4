"""Portal forms. They only shape HTML input into the documents the domain services take; the rules
(what a valid scenario or fleet is) live in the engine parser and the services, and their errors are mapped
back onto these fields so they show inline. One module per form: builder, fleets, sweeps; shared pieces in common.
"""

from portal.forms.builder import ScenarioBuilderForm
from portal.forms.common import (
    COST_FIELDS,
    FABRIC_CHOICES,
    FLEET_CLUSTER_FIELDS,
    LINK_SPEEDS,
    TOPOLOGY_CHOICES,
    FieldErrorMixin,
)
from portal.forms.fleets import FleetForm
from portal.forms.sweeps import SweepForm

__all__ = [
    "COST_FIELDS",
    "FABRIC_CHOICES",
    "FLEET_CLUSTER_FIELDS",
    "LINK_SPEEDS",
    "TOPOLOGY_CHOICES",
    "FieldErrorMixin",
    "FleetForm",
    "ScenarioBuilderForm",
    "SweepForm",
]
