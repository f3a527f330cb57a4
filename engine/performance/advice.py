"""Ways out of a dead end: when no parallel layout can use the cluster as given, which GPU counts can.

A training job splits its GPUs into tensor × pipeline × data × context parallel groups
(``tp * pp * dp * cp = gpus``) under the workload's own constraints: data-parallel groups divide the
global batch (with the micro-batch), tensor-parallel groups divide the attention heads, pipeline
stages hold at least one layer each, context-parallel groups divide the sequence length. A GPU count
with a prime factor none of these can absorb (1,000 = 2³ × 5³ against a power-of-two batch and heads)
has no layout at all. :func:`nearest_workable_gpus` finds the closest whole-server counts that do
have one, and the largest count at or below the cluster's size, so a planner can either resize the
cluster or run on N of its M GPUs and keep the rest as spares. When the global batch is what fails (the GPU
count has a factor the batch lacks, so data parallelism cannot take it), :func:`nearest_batches` also finds the
nearest global batches that give the same GPU count a layout: multiples of ``gpus / gcd(gpus, batch)``.

Pure Python (no Django): it uses the engine's own candidate enumeration, so "workable" here means
exactly what ``predict``/``search`` accept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.api import candidate_layouts
from engine.schema.types import ScenarioSpec

DEFAULT_SEARCH_NODES = 256  # look this many servers either side of the requested size
DEFAULT_GPUS_PER_NODE = 8  # a document that does not say: HGX servers
BATCH_TRIES = 32  # multiples of the missing factor tried on each side of the global batch
BATCH_RANGE = 2  # ... within a factor of 2 of it (a planner re-tunes a batch by tens of percent, not by 10x)


@dataclass(frozen=True)
class GpuCountAdvice:
    """The nearest GPU counts with at least one valid layout, around a requested count."""

    requested: int
    gpus_per_node: int
    workable: bool
    below: int | None  # largest workable count < requested (also the "run on N of M" option)
    above: int | None  # smallest workable count > requested
    reason: str  # why the requested count has no layout, in planner terms ("" when it has one)
    batch: int = 0  # the document's global batch
    batch_below: int | None = None  # nearest global batch < batch that gives the requested GPUs a layout
    batch_above: int | None = None  # nearest global batch > batch that does

    @property
    def spares(self) -> int | None:
        """GPUs left idle when running on ``below`` of the requested GPUs."""
        return None if self.below is None else self.requested - self.below

    def message(self) -> str:
        """One paragraph: why, and the way out."""
        if self.workable:
            return ""
        options = []
        if self.below is not None and self.above is not None:
            options.append(f"the nearest GPU counts that work are {self.below:,} and {self.above:,}")
        elif self.below is not None or self.above is not None:
            options.append(f"the nearest GPU count that works is {(self.below or self.above):,}")
        if self.below is not None:
            options.append(f"or run on {self.below:,} of the {self.requested:,} GPUs and keep "
                           f"{self.spares:,} as spares")
        batches = [f"{b:,}" for b in (self.batch_below, self.batch_above) if b is not None]
        if batches:
            options.append(f"or keep {self.requested:,} GPUs with a global batch of {' or '.join(batches)} "
                           f"instead of {self.batch:,}")
        way_out = ("; ".join(options) + ".") if options else "no whole-server count nearby works either."
        return f"{self.reason} Way out: {way_out[0].lower()}{way_out[1:]}"

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested, "gpus_per_node": self.gpus_per_node, "workable": self.workable,
                "below": self.below, "above": self.above, "spares": self.spares, "reason": self.reason,
                "batch": self.batch, "batch_below": self.batch_below, "batch_above": self.batch_above,
                "message": self.message()}


def _factorize(n: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    p = 2
    while p * p <= n:
        k = 0
        while n % p == 0:
            n //= p
            k += 1
        if k:
            out.append((p, k))
        p += 1
    if n > 1:
        out.append((n, 1))
    return out


def factor_text(n: int) -> str:
    """``n`` as its prime factors, ``2⁵ × 3² × 7``."""
    return _factor_text(n)


def _factor_text(n: int) -> str:
    sup = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
    return " × ".join(f"{p}{str(k).translate(sup)}" if k > 1 else str(p) for p, k in _factorize(n))


# the document fields whose errors mean "no layout" (rather than a bad field elsewhere)
LAYOUT_ERROR_FIELDS = ("parallelism", "training.global_batch", "training.micro_batch")


def with_size(doc: Mapping[str, Any], gpus: int, batch: int | None = None) -> dict[str, Any]:
    """A copy of the document on ``gpus`` GPUs (and with global batch ``batch`` when given)."""
    out = dict(doc)
    cluster = dict(out.get("cluster") or {})
    cluster["gpus"] = gpus
    if isinstance(cluster.get("pod_gpus"), int):
        cluster["pod_gpus"] = min(cluster["pod_gpus"], gpus)
    out["cluster"] = cluster
    if batch is not None:
        out["training"] = {**dict(out.get("training") or {}), "global_batch": batch}
    return out


_with_gpus = with_size


def _is_layout_error(exc: ScenarioError) -> bool:
    return str(exc.field).startswith(LAYOUT_ERROR_FIELDS)


def has_layout(doc: Mapping[str, Any], gpus: int, catalog: CatalogItems | None = None,
               batch: int | None = None) -> bool:
    """Whether the engine finds at least one layout for the document on ``gpus`` GPUs (and global batch ``batch``).

    Errors that have nothing to do with the layout (a bad field elsewhere) are raised, not hidden.
    """
    try:
        candidate_layouts(parse_scenario(with_size(doc, gpus, batch), catalog))
    except ScenarioError as exc:
        if _is_layout_error(exc):
            return False
        raise
    return True


def batch_step(gpus: int, batch: int) -> int:
    """The factor of the GPU count that the global batch lacks, ``gpus / gcd(gpus, batch)``: data parallelism
    divides both, so only a batch that is a multiple of it lets data parallelism take that factor."""
    return gpus // math.gcd(gpus, batch)


def nearest_batches(gpus: int, batch: int, works: Callable[[int], bool], *, micro_batch: int = 1,
                    tries: int = BATCH_TRIES) -> tuple[int | None, int | None]:
    """The nearest global batches below and above ``batch`` that ``works``: with a fixed ``micro_batch``, counted
    in micro-batches (``n = batch / micro_batch``, which data parallelism must divide), multiples of
    :func:`batch_step` ``(gpus, n)`` within a factor of ``BATCH_RANGE`` of ``n``, at most ``tries`` on each side.
    (None, None) when the batch already has every factor of the GPU count (step 1: the batch is not what fails)."""
    mb = max(1, micro_batch)
    n = batch // mb
    step = batch_step(gpus, n) if n > 0 else 1
    if step == 1:
        return None, None
    low = max(step, math.ceil(n / BATCH_RANGE))
    downs = range((n - 1) // step * step, low - 1, -step)
    ups = range((n // step + 1) * step, n * BATCH_RANGE + 1, step)
    below = next((k * mb for k in downs[:tries] if works(k * mb)), None)
    above = next((k * mb for k in ups[:tries] if works(k * mb)), None)
    return below, above


def _reason(s: ScenarioSpec, gpus: int) -> str:
    m, t, p = s.model, s.training, s.parallelism
    fixed = [f"{name} = {value}" for name, value in (("tp", p.tp), ("pp", p.pp), ("cp", p.cp)) if value is not None]
    rules = [
        f"data-parallel groups must divide the global batch of {t.global_batch:,} sequences"
        + (f" in micro-batches of {t.micro_batch}" if t.micro_batch else ""),
        f"tensor-parallel groups must divide the {m.heads} attention heads",
        f"pipeline stages cannot outnumber the {m.layers} layers",
        f"context-parallel groups must divide the {m.seq_len:,}-token sequence",
    ]
    text = (f"No layout can use {gpus:,} GPUs ({_factor_text(gpus)}): the GPUs are split as tensor × pipeline "
            f"× data × context parallel groups, and " + ", ".join(rules) + ".")
    if fixed:
        text += " The scenario also fixes " + ", ".join(fixed) + "."
    return text


def nearest_workable_gpus(scenario: Mapping[str, Any], catalog: CatalogItems | None = None, *,
                          search_nodes: int = DEFAULT_SEARCH_NODES) -> GpuCountAdvice:
    """The nearest whole-server GPU counts (below and above the scenario's) that have a valid layout.

    ``scenario`` is the engine document (a mapping); each candidate count is checked by parsing the
    document with that count, so fixed settings (tp, dp, micro-batch ...) are respected.
    """
    raw = scenario.get("cluster")
    cluster: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    gpus = int(cluster.get("gpus") or 0)
    gpn = max(1, int(cluster.get("gpus_per_node") or DEFAULT_GPUS_PER_NODE))
    per_rack = cluster.get("gpus_per_rack")
    if isinstance(per_rack, int) and not isinstance(per_rack, bool) and per_rack > 0:
        gpn = per_rack  # the job uses cluster.gpus_per_rack GPUs of each rack: counts step by that
    if gpus < 1:
        raise ScenarioError("cluster.gpus", "must be a positive integer")
    if has_layout(scenario, gpus, catalog):
        return GpuCountAdvice(requested=gpus, gpus_per_node=gpn, workable=True, below=None, above=None, reason="")
    base = (gpus // gpn) * gpn  # counts are whole servers; a partial server rounds down
    start = base if base < gpus else base - gpn
    below = next((n for n in range(start, 0, -gpn)
                  if gpus - n <= search_nodes * gpn and has_layout(scenario, n, catalog)), None)
    above = next((n for n in range(base + gpn, base + (search_nodes + 1) * gpn, gpn)
                  if has_layout(scenario, n, catalog)), None)
    workable = below if below is not None else above
    s = parse_scenario(_with_gpus(scenario, workable), catalog) if workable is not None else None
    batch = global_batch_of(scenario)
    batch_below, batch_above = (nearest_batches(gpus, batch, lambda b: has_layout(scenario, gpus, catalog, b),
                                                micro_batch=micro_batch_of(scenario))
                                if batch > 0 else (None, None))
    return GpuCountAdvice(requested=gpus, gpus_per_node=gpn, workable=False, below=below, above=above,
                          reason=_reason(s, gpus) if s is not None else
                          f"No layout can use {gpus:,} GPUs ({_factor_text(gpus)}) with this workload.",
                          batch=batch, batch_below=batch_below, batch_above=batch_above)


def global_batch_of(doc: Mapping[str, Any]) -> int:
    """The document's global batch as written (a range's ``likely`` value; 0 when it has none to offer)."""
    return _training_int(doc, "global_batch", 0)


def micro_batch_of(doc: Mapping[str, Any]) -> int:
    """The document's fixed micro-batch (1 when it is "auto" or absent: the search may then use 1)."""
    return _training_int(doc, "micro_batch", 1)


def _training_int(doc: Mapping[str, Any], key: str, otherwise: int) -> int:
    training = doc.get("training")
    raw = training.get(key) if isinstance(training, Mapping) else None
    if isinstance(raw, Mapping):
        raw = raw.get("likely")
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else otherwise
