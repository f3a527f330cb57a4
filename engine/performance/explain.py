"""Every intermediate of one layout, as JSON: what ``predict`` computed and why (like Calculon's stats).

``explain(scenario)`` evaluates the layout ``predict`` picks (or the best one matching ``layout``) term by term
(model.step_terms) and returns a nested dict of the named records: per layer and micro-batch (``terms.layer``,
``terms.tensor_parallel`` ...), per micro-batch on the bottleneck stage (``terms.step.microbatch``), per step
(``terms.step``). Every number carries its unit in its key (``_s`` seconds, ``_bytes``, ``_flops`` ...: ``units``)
or, where the key cannot say it, as ``{"value": ..., "unit": ...}``; a key whose unit suffix names a mapping
(``breakdown_s``, ``exposed_s``) gives the unit of the values inside. Cheap: the search ranks the candidates as
``predict`` does, then one layout is evaluated term by term.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import candidate_layouts, rank_layouts
from engine.performance.calibrated import overlay_from_scenario
from engine.performance.context import DP_PLACEMENT_NAMES, RECOMPUTE_NAMES, Context, Layouts, make_context
from engine.performance.hardware import gpu_spec
from engine.performance.model import evaluate, step_terms
from engine.performance.terms.groups import fabric_groups
from engine.performance.terms.memory import usable_memory_bytes
from engine.schema.types import ScenarioSpec

# unit of a number by the suffix of its key (the first that matches)
UNIT_SUFFIXES = {
    "_s": "s", "_bytes": "bytes", "_flops": "FLOP", "_params": "parameters", "_tokens": "tokens",
    "_elems": "elements per token", "_layers": "layers", "_ranks": "ranks", "_microbatches": "micro-batches",
    "_gpus": "GPUs", "_count": "count", "_fraction": "fraction", "_factor": "factor",
}
# fields whose name cannot carry a suffix (shared with the framework profile records)
FIELD_UNITS = {"tp_overlap": "fraction"}
# the layout as Result.parallelism names it -> the Layouts array
LAYOUT_KEYS = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep", "vpp": "vpp", "micro_batch": "mb",
               "sequence_parallel": "sp", "recompute": "recompute", "zero": "zero", "dp_placement": "dp_outer",
               "etp": "etp"}


def unit_of(key: str) -> str | None:
    return FIELD_UNITS.get(key) or next((u for s, u in UNIT_SUFFIXES.items() if key.endswith(s)), None)


def to_json(value: Any, key: str = "") -> Any:
    """A record of arrays of one layout as JSON: records and mappings as dicts, one-element arrays as numbers."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    arr = np.asarray(value)
    if arr.dtype == np.bool_:
        return bool(arr.reshape(-1)[0])
    number = float(arr.reshape(-1)[0])
    return {"value": number, "unit": FIELD_UNITS[key]} if key in FIELD_UNITS else number


def _matching(lay: Layouts, layout: Mapping[str, Any]) -> np.ndarray:
    unknown = sorted(set(layout) - set(LAYOUT_KEYS))
    if unknown:
        raise ScenarioError("layout", f"unknown keys {', '.join(unknown)}; use {', '.join(LAYOUT_KEYS)}")
    keep = np.ones(len(lay), dtype=bool)
    for key, want in layout.items():
        have = getattr(lay, LAYOUT_KEYS[key])
        if key == "recompute":
            have = np.asarray([RECOMPUTE_NAMES[int(v)] for v in have])
        elif key == "dp_placement":
            have = np.asarray([DP_PLACEMENT_NAMES[int(v)] for v in have])
        keep &= have == want
    if not keep.any():
        raise ScenarioError("layout", f"{dict(layout)} is not a candidate layout of this scenario")
    return np.flatnonzero(keep)


def _one_layout(ctx: Context, lay: Layouts, layout: Mapping[str, Any] | None) -> Layouts:
    """The layout predict picks among those matching ``layout`` (all candidates when None)."""
    if layout is not None:
        lay = lay.take(_matching(lay, layout))
    if len(lay) > 1:
        order, _ = rank_layouts(evaluate(ctx, lay))
        lay = lay.take(order[:1])
    return lay


def _groups_json(ctx: Context, lay: Layouts) -> dict[str, Any]:
    groups = fabric_groups(ctx, lay)
    return {str(g): {"size_ranks": int(groups.ranks[g][0]), "stride_gpus": int(groups.strides[g][0]),
                     "ranks_per_domain_count": float(p.k[0]), "domains_count": float(p.nodes[0]),
                     "leaf_crossing_fraction": float(p.f_leaf[0]), "pod_crossing_fraction": float(p.f_pod[0]),
                     "routing_share_fraction": float(p.share[0]),
                     "ring_routing_share_fraction": float(p.share_ring[0]), "hop_latency_s": float(p.hop[0]),
                     "on_nic": bool(groups.on_nic(g)[0])}
            for g, p in groups.placements.items()}


def explain(scenario: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None = None,
            layout: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every term of one layout of ``scenario`` (``predict``'s pick, or the best matching ``layout``, given as
    ``Result.parallelism`` names it, any subset of its keys) as a JSON-able nested dict."""
    s = parse_scenario(scenario, catalog)
    overlay = overlay_from_scenario(s, catalog)
    ctx = make_context(s, gpu_spec(s.cluster.gpu, catalog))
    if overlay is not None:
        ctx = overlay.apply_to_context(ctx)
    lay = _one_layout(ctx, candidate_layouts(s), layout)
    terms = step_terms(ctx, lay)
    usable = usable_memory_bytes(ctx.gpu)
    return {
        "layout": lay.parallelism(0),
        "step_time_s": float(terms.step.step_s[0]),
        "memory_bytes": float(terms.memory.total_bytes[0]),
        "memory_limit_bytes": usable,
        "fits": bool(terms.memory.total_bytes[0] <= usable),
        # predict multiplies the step time by a calibration profile's residual factor, when it carries one
        "calibration_residual_factor": overlay.residual_factor if overlay is not None else 1.0,
        "units": {"suffixes": dict(UNIT_SUFFIXES), "fields": dict(FIELD_UNITS)},
        "groups": _groups_json(ctx, lay),
        "terms": to_json(terms),
    }
