"""Awkward sizes: a GPU count and global batch that have layouts, but only poor ones, and the nearest that factor well.

A job splits its GPUs as tensor × pipeline × data × context parallel groups. Tensor parallelism divides the
attention heads, context parallelism the sequence, data parallelism the global batch; whatever factor of the GPU
count none of them can take lands on the pipeline. 2,016 GB300 GPUs (28 NVL72 racks, 2⁵ × 3² × 7) with a global
batch of 2,048 (2¹¹) leave 63 to the pipeline: every layout has at least 63 stages for Llama 3 70B's 80 layers, so
the busiest stage holds 2 layers where the average is 1.27 and MFU falls from about 45% to 26%.

The rule (docs/performance-model.md, "Advice"), measured on the engine's own candidate layouts
(:func:`engine.performance.api.candidate_layouts`, fixed settings respected, memory ignored so that only the
factoring is judged): let ``p`` be the fewest pipeline stages any layout can use on these GPUs at this batch. The
size **factors badly** when ``p > 1`` and either

* fewer than ``MIN_LAYERS_PER_STAGE`` (4) layers per stage are left, ``L < 4 p``: the interleaved schedule's fill
  and drain bubble, ``(p - 1) / (v m)`` of the step (Narayanan et al., SC21), can be cut by at most ``v <= L / p``
  virtual stages, and each stage's point-to-point and scheduling overheads are paid for very little compute; or
* the stages are uneven by more than a tenth, ``L / (p * ceil(L / p)) < MIN_STAGE_BALANCE`` (0.90): the busiest
  stage sets the pace and the others idle.

2,016 GPUs at batch 2,048 on an 80-layer model: p = 63 (1.27 layers per stage), flagged; 2,304 GPUs: p = 9 (8.9
layers per stage, balance 80 / 81), not flagged; 2,048 GPUs: p = 1. On the engine (Llama 3 70B, GB300, batch
2,048) the flagged counts 1,440 / 1,728 / 1,856 / 2,016 predict 11-44% less MFU than 2,048 GPUs, the others
(1,152 / 1,792 / 2,304) 1-5% less.

The advice then names the nearest sizes that factor well (:attr:`Factoring.well`), each predicted once with the
engine's own search: whole nodes (whole NVL72 racks of 72) below and above, for a node that is not a power of two
(NVL72) also the largest power of two of each node (64 of 72 per rack, 8 spares per rack) below and above, and the
nearest global batches on the same GPUs (multiples of ``gpus / gcd(gpus, batch)``, :func:`.advice.nearest_batches`).
At most ``2 * (2 + 1)`` predictions, and only for a size that is flagged. A 64-of-72 size is predicted as the
document would run it with ``cluster.gpus_per_rack = 64`` (NVLink domains of 64, ceil(gpus / 64) racks), and its
label says to set that; a document that already sets ``cluster.gpus_per_rack`` is sized in racks of that many
used GPUs (and, when that is a power of two, in those steps only).

Pure Python (no Django). The note is added to a result's ``notes`` by its caller (the run service), so ``predict``
itself pays nothing; given the layout the prediction chose, a size whose chosen pipeline passes the rule costs
nothing more either (no second parse): only a flagged size parses and predicts again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.advice import (
    batch_step,
    factor_text,
    nearest_batches,
    with_size,
)
from engine.performance.api import candidate_layouts, predict
from engine.schema.types import ScenarioSpec

MIN_LAYERS_PER_STAGE = 4  # a size that factors well leaves at least this many layers per pipeline stage ...
MIN_STAGE_BALANCE = 0.90  # ... and stages within a tenth of even (see the module docstring)
SEARCH_NODES = 32  # nodes (racks) looked at on each side of the requested size
HGX_GPUS = 8  # an HGX server; a larger NVLink domain is a rack-scale system (an NVL72 rack)
_PERCENT = 100.0


def stage_balance(layers: int, pp: int) -> float:
    """Share of a pipeline's layer slots that hold a layer: ``L / (p * ceil(L / p))`` (1.0 for even stages)."""
    return layers / (pp * -(-layers // pp))


@dataclass(frozen=True)
class Factoring:
    """How a GPU count and global batch factor: the fewest pipeline stages any layout can use (0: no layout)."""

    min_pp: int
    layers: int

    @property
    def has_layout(self) -> bool:
        return self.min_pp > 0

    @property
    def balance(self) -> float:
        return stage_balance(self.layers, self.min_pp) if self.has_layout else 0.0

    @property
    def well(self) -> bool:
        """Has a layout and leaves the pipeline free: one stage, or at least 4 layers per stage within 10% of even."""
        if not self.has_layout:
            return False
        return self.min_pp == 1 or (self.layers >= MIN_LAYERS_PER_STAGE * self.min_pp
                                    and self.balance >= MIN_STAGE_BALANCE)


def factoring(s: ScenarioSpec) -> Factoring:
    """:class:`Factoring` of a parsed scenario."""
    try:
        lay = candidate_layouts(s)
    except ScenarioError:
        return Factoring(0, s.model.layers)
    return Factoring(int(lay.pp.min()), s.model.layers)


def factoring_of(doc: Mapping[str, Any], gpus: int, batch: int | None = None,
                 catalog: CatalogItems | None = None) -> Factoring:
    """:class:`Factoring` of the document on ``gpus`` GPUs (and global batch ``batch``); a size the document cannot
    take at all (a refused GPU count) has no layout."""
    try:
        return factoring(parse_scenario(with_size(doc, gpus, batch), catalog))
    except ScenarioError:
        return Factoring(0, 0)


@dataclass(frozen=True)
class SizeOption:
    """A nearby size that factors well, with what the engine predicts for it."""

    gpus: int
    batch: int
    nodes: int  # nodes (racks) it occupies
    per_node: int  # GPUs used per node (64 of an NVL72's 72, or all of them)
    gpus_per_node: int
    mfu: float | None  # None when its best layout does not fit in memory
    step_time_s: float | None
    set_per_rack: bool = False  # the document must set cluster.gpus_per_rack = per_node to run it so

    def label(self, requested_batch: int) -> str:
        if self.batch != requested_batch:
            where = f"global batch {self.batch:,} on the same GPUs"
        elif self.per_node < self.gpus_per_node:
            where = (f"{self.gpus:,} GPUs, {self.per_node} of {self.gpus_per_node} in each of {self.nodes:,} "
                     f"{_node_word(self.gpus_per_node)}s, {self.nodes * self.gpus_per_node - self.gpus:,} spares")
            if self.set_per_rack:
                where += f" (set cluster.gpus_per_rack = {self.per_node})"
        else:
            where = f"{self.gpus:,} GPUs ({self.nodes:,} whole {_node_word(self.gpus_per_node)}s)"
        figure = f"MFU {self.mfu * _PERCENT:.1f}%" if self.mfu is not None else "does not fit in memory"
        return f"{where}: {figure}"

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "global_batch": self.batch, "nodes": self.nodes, "gpus_per_node_used": self.per_node,
                "mfu": self.mfu, "step_time_s": self.step_time_s}


def _node_word(gpn: int) -> str:
    return "rack" if gpn > HGX_GPUS else "server"


@dataclass(frozen=True)
class SizingAdvice:
    """Why a size factors badly and the nearest sizes and batches that factor well."""

    gpus: int
    batch: int
    layers: int
    fact: Factoring
    mfu: float | None  # the requested size's predicted MFU, when the caller has it
    options: list[SizeOption] = field(default_factory=list)

    def message(self) -> str:
        p, layers = self.fact.min_pp, self.layers
        busiest = -(-layers // p)
        text = (f"Awkward size: {self.gpus:,} GPUs ({factor_text(self.gpus)}) with a global batch of {self.batch:,} "
                f"factor badly: what the batch, attention heads and sequence cannot take lands on the pipeline, so "
                f"every layout has at least {p} pipeline stages for {layers} layers ({busiest} on the busiest stage, "
                f"{layers / p:.2f} on average; a size that factors well leaves one stage, or at least "
                f"{MIN_LAYERS_PER_STAGE} layers per stage within {1 - MIN_STAGE_BALANCE:.0%} of even)")
        if self.mfu is not None:
            text += f"; predicted MFU {self.mfu * _PERCENT:.1f}%"
        if not self.options:
            return text + ". No nearby size or batch factors well."
        return text + ". Nearest that factor well: " + "; ".join(o.label(self.batch) for o in self.options) + "."

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "global_batch": self.batch, "min_pp": self.fact.min_pp,
                "stage_balance": self.fact.balance, "options": [o.to_dict() for o in self.options], "message": self.message()}


def _units(gpn: int) -> list[int]:
    """The steps a GPU count is taken in: whole nodes, and for a node that is not a power of two (an NVL72 rack)
    the largest power of two of it per node (64 of 72, the rest spares)."""
    power = 1 << (gpn.bit_length() - 1)
    return [gpn] if power == gpn else [gpn, power]


def nearest_well_factored(doc: Mapping[str, Any], gpus: int, gpn: int, unit: int,
                          catalog: CatalogItems | None = None, search_nodes: int = SEARCH_NODES
                          ) -> tuple[int | None, int | None]:
    """The nearest multiples of ``unit`` below and above ``gpus`` (within ``search_nodes`` nodes) that factor
    well at the document's batch."""
    def well(n: int) -> bool:
        return factoring_of(doc, n, None, catalog).well

    downs = range((gpus - 1) // unit * unit, max(0, gpus - search_nodes * gpn) - 1, -unit)
    ups = range((gpus // unit + 1) * unit, gpus + search_nodes * gpn + 1, unit)
    return next((n for n in downs if n > 0 and well(n)), None), next((n for n in ups if well(n)), None)


def _option(doc: Mapping[str, Any], gpus: int, batch: int, gpn: int, per_node: int,
            catalog: CatalogItems | None, *, set_per_rack: bool = False) -> SizeOption | None:
    """The option of ``gpus`` GPUs at ``batch``, ``per_node`` used in each node; ``set_per_rack``: predicted with
    ``cluster.gpus_per_rack = per_node`` (the document does not set it), as a planner would run it."""
    sized = with_size(doc, gpus, batch)
    if set_per_rack:
        sized["cluster"] = {**sized["cluster"], "gpus_per_rack": per_node}
    try:
        r = predict(sized, catalog=catalog)
    except ScenarioError:
        return None
    return SizeOption(gpus=gpus, batch=batch, nodes=-(-gpus // per_node), per_node=per_node, gpus_per_node=gpn,
                      mfu=r.mfu, step_time_s=r.step_time_s, set_per_rack=set_per_rack)


def chosen_pipeline_is_fine(doc: Mapping[str, Any], parallelism: Mapping[str, Any]) -> bool:
    """Whether the layout a prediction chose (its result's ``parallelism``) already has a pipeline that passes the
    rule; then the size cannot be forced into a worse one and nothing more is looked at (not even a parse)."""
    model = doc.get("model")
    layers, pp = (model.get("layers") if isinstance(model, Mapping) else None), parallelism.get("pp")
    if not isinstance(layers, int) or not isinstance(pp, (int, float)) or pp < 1:
        return False
    return Factoring(int(pp), layers).well


def sizing_advice(doc: Mapping[str, Any], catalog: CatalogItems | None = None, *, mfu: float | None = None,
                  chosen: Mapping[str, Any] | None = None) -> SizingAdvice | None:
    """The advice for a document whose size factors badly (None when it factors well, has no layout at all (that
    dead end is :func:`.advice.nearest_workable_gpus`'s) or fixes its pipeline degree: then the pipeline is the
    planner's choice, not the size's). ``chosen``: the parallelism a prediction of the document chose; when its
    pipeline passes the rule the answer is None at once (a run's execution parses its document once)."""
    if chosen is not None and chosen_pipeline_is_fine(doc, chosen):
        return None
    s = parse_scenario(doc, catalog)
    if s.parallelism.pp is not None:
        return None
    fact = factoring(s)
    if not fact.has_layout or fact.well:
        return None
    gpus, gpn, batch = s.cluster.gpus, s.cluster.gpus_per_node, s.training.global_batch
    used = s.cluster.gpus_used_per_node  # gpn, or the document's cluster.gpus_per_rack
    rack_scale = s.cluster.rack_scale
    options: list[SizeOption] = []
    for unit in _units(used):
        for n in nearest_well_factored(doc, gpus, used, unit, catalog):
            if n is not None and all(o.gpus != n for o in options):
                opt = _option(doc, n, batch, gpn, unit, catalog, set_per_rack=rack_scale and unit < used)
                options += [opt] if opt is not None else []
    if batch_step(gpus, batch // (s.training.micro_batch or 1)) > 1:
        for b in nearest_batches(gpus, batch, lambda b: factoring_of(doc, gpus, b, catalog).well,
                                 micro_batch=s.training.micro_batch or 1):
            opt = _option(doc, gpus, b, gpn, used, catalog) if b is not None else None
            options += [opt] if opt is not None else []
    options.sort(key=lambda o: (o.batch != batch, o.gpus, o.batch))
    return SizingAdvice(gpus=gpus, batch=batch, layers=s.model.layers, fact=fact, mfu=mfu, options=options)
