"""The scenario builder's initial values for an existing scenario document (its edit page): every input the
form shows, read back from the stored document; cost ranges become low / likely / high."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.schema.fields import field
from planning.services import gpu_server_item
from portal.forms.builder_sections import initial_values
from portal.forms.common import COST_FIELDS, RANGE_INPUTS, _range_value, nic_gbps_of
from portal.presets import PRESETS, _tidy

_DEFAULT_DISTRIBUTION = field("uncertainty.distribution").default


def initial_from_document(doc: Mapping[str, Any], *, name: str = "", description: str = "", watched: bool = False,
                          fleet: Any = None, catalog: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Form values for an existing scenario document (ScenarioBuilderForm.initial_from_document)."""
    m = doc.get("model", {}) or {}
    t = doc.get("training", {}) or {}
    c = doc.get("cluster", {}) or {}
    costs = doc.get("costs", {}) or {}
    unc = doc.get("uncertainty", {}) or {}
    initial: dict[str, Any] = {
        "name": name or doc.get("name", ""), "description": description, "watched": watched,
        "preset": "custom", "fleet": str(fleet.pk) if fleet is not None else "",
        "model_name": m.get("name", ""), "layers": m.get("layers"), "hidden": m.get("hidden"),
        "heads": m.get("heads"), "kv_heads": m.get("kv_heads", m.get("heads")),
        "ffn_hidden": m.get("ffn_hidden"), "gated_ffn": m.get("gated_ffn", False),
        "parallel_block": m.get("parallel_block", False), "vocab": m.get("vocab"),
        "seq_len": m.get("seq_len"), "global_batch": t.get("global_batch"),
        "tokens_b": _tidy(float(t["tokens"]) / 1e9) if isinstance(t.get("tokens"), int | float) else None,
        "precision": t.get("precision", field("training.precision").default),
        "recompute": t.get("recompute", field("training.recompute").default),
        "gpu": c.get("gpu"), "gpus": c.get("gpus"), "gpus_per_node": c.get("gpus_per_node", 8),
        "nic_gbps": nic_gbps_of(c, catalog), "fabric": c.get("fabric", field("cluster.fabric").default),
        "topology": c.get("topology", field("cluster.topology").default),
        "oversubscription": c.get("oversubscription", field("cluster.oversubscription").default),
        "distribution": (unc if isinstance(unc, Mapping) else {}).get("distribution", _DEFAULT_DISTRIBUTION),
    }
    oversub = c.get("oversubscription", 1.0)
    if isinstance(oversub, int | float) and oversub > 1 and isinstance(c.get("pod_gpus"), int):
        initial["pod_gpus"] = c["pod_gpus"]
    _cost_values(initial, costs, c, catalog)
    for key, preset in PRESETS.items():
        if preset["model"] == {k: m.get(k) for k in preset["model"]}:
            initial["preset"] = key
            break
    initial.update(initial_values(doc))  # MoE, framework, dispatcher, training formats, degrees, NICs, routing
    return {k: v for k, v in initial.items() if v is not None}


def _cost_values(initial: dict[str, Any], costs: Mapping[str, Any], cluster: Mapping[str, Any],
                 catalog: Mapping[str, Mapping[str, Any]] | None) -> None:
    """The cost inputs and their ranges (low / likely / high; the server price's as % of its likely price)."""
    for key in COST_FIELDS:
        if isinstance(costs.get(key), int | float):
            initial[key] = costs[key]
    raw_goodput = costs.get("goodput")
    goodput: Mapping[str, Any] = raw_goodput if isinstance(raw_goodput, Mapping) else {}
    for name, path, _default in RANGE_INPUTS:
        node: Any = costs
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        low, likely, high = _range_value(node)
        if likely is not None:
            initial[name] = likely
        if low is not None and high is not None:
            initial[f"{name}_low"], initial[f"{name}_high"] = low, high
    if "failure_rate_scale" not in initial and not goodput.get("failure_rate_scale"):
        initial["failure_rate_scale"] = 1.0
    if catalog is not None and isinstance(cluster.get("gpu"), str):
        item = gpu_server_item(gpu=cluster["gpu"], catalog=catalog, server=costs.get("server"))
        raw_prices = costs.get("prices")
        prices: Mapping[str, Any] = raw_prices if isinstance(raw_prices, Mapping) else {}
        low, likely, high = _range_value(prices.get(item["key"])) if item else (None, None, None)
        if low is not None and high is not None and likely:
            initial["server_price_low_pct"] = round((low / likely - 1) * 100, 1)
            initial["server_price_high_pct"] = round((high / likely - 1) * 100, 1)
