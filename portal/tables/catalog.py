"""The catalog page's item table: one kind of item of a catalog version (dicts in engine form)."""

from __future__ import annotations

from typing import Any

import django_tables2 as tables
from django.utils.text import Truncator

from portal.tables.base import NUM, FormatColumn, MissingLastListData, PortalTable, cell

# The spec figures worth a column, per kind (key in ``specs``, header with its unit in brackets).
SPEC_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "gpu": [("bf16_dense_tflops", "BF16 (TFLOP/s)"), ("fp8_dense_tflops", "FP8 (TFLOP/s)"), ("hbm_gb", "HBM (GB)"),
            ("nvlink_gbytes_per_s", "NVLink (GB/s)")],
    "server": [("gpu", "GPU"), ("gpus_per_server", "GPUs"), ("nodes_per_rack", "Servers per rack")],
    "nic": [("gbps", "Speed (Gb/s)"), ("ports", "Ports"), ("form", "Form"), ("fabrics", "Fabrics")],
    "switch": [("fabric", "Fabric"), ("radix", "Radix (ports)"), ("port_gbps", "Port (Gb/s)"),
               ("switching_tbps", "Switching (Tb/s)")],
    "transceiver": [("gbps", "Speed (Gb/s)"), ("links", "Links"), ("media", "Media"), ("reach", "Reach")],
    "cable": [("gbps", "Speed (Gb/s)"), ("links", "Links"), ("media", "Media"), ("max_m", "Max length (m)")],
    "facility": [("usd_per_kwh", "Electricity ($/kWh)"), ("pue", "PUE"), ("depreciation_years", "Depreciation (years)")],
    "reliability": [("component", "Component"), ("rate_per_unit_day", "Failures per unit-day")],
}


def spec_text(value: Any) -> str:
    """A spec figure as a planner reads it: thousands separated (2,250 TFLOP/s, not 2250.0), a whole float without
    its ``.0``, other numbers as given; text as is; lists joined with commas."""
    if isinstance(value, list):
        return ", ".join(spec_text(v) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return f"{value:,.0f}"
    return f"{value:,}"


class SpecColumn(tables.Column):
    """One figure of an item's ``specs`` (lists joined with commas)."""

    def render(self, value: Any) -> str:
        return spec_text(value)


class CatalogItemTable(PortalTable):
    key = tables.Column(verbose_name="Key", attrs=cell(td="mono"))
    name = tables.Column(verbose_name="Name")
    unit_price_usd = FormatColumn("usd_full", verbose_name="Unit price")
    power_w = FormatColumn("watts", verbose_name="Power")
    source = tables.Column(verbose_name="Source", orderable=False, attrs=cell(td="source"))

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "catalog-table"}
        sequence = ("key", "name", "unit_price_usd", "power_w", "...", "source")
        order_by = ("key",)

    def render_source(self, value: str) -> str:
        return Truncator(value).chars(220)

    def __init__(self, items: list[dict[str, Any]], *, kind: str, **kwargs: Any) -> None:
        specs = [(f"spec_{key}", SpecColumn(verbose_name=label, accessor=f"specs__{key}", orderable=False,
                                             attrs=NUM)) for key, label in SPEC_COLUMNS.get(kind, [])]
        super().__init__(MissingLastListData(items), extra_columns=specs, **kwargs)
