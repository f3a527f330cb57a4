"""The way out of a dead end, for a run or a draft document: nearest GPU counts (and global batches) that have a
layout; and, for a size that runs but factors badly, the note naming the nearest sizes and batches that factor well.

Thin wrapper over :mod:`engine.performance.advice` and :mod:`engine.performance.sizing_advice` (the rules live
there); used by the run page, the builder's live estimate, the API's run error and the run results, so every
surface offers the same way out.

Whether an error is that dead end is decided from the error's machine code (``no_layout``,
:mod:`engine.errors`) and its field, never from the wording of its message; a stored run keeps only the field
(``parallelism``), and the engine itself then says whether the GPU count has a layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import INVALID, NO_LAYOUT, ScenarioError
from engine.performance.advice import nearest_workable_gpus
from engine.performance.sizing_advice import sizing_advice
from simulations.models import RunStatus, SimulationRun

#: the field a dead-end layout error names (the whole layout, not one degree)
LAYOUT_FIELD = "parallelism"


def is_layout_dead_end(*, field: str = "", code: str = "", error: str = "") -> bool:
    """Whether an error may be the dead end "no layout can use these GPUs": its code says so, or (an error without
    a code of its own, a stored run) it names the whole layout. ``error`` (the message) is not read."""
    del error  # kept in the signature for callers that pass it; the decision never reads the wording
    if code and code != INVALID:
        return code == NO_LAYOUT
    return field == LAYOUT_FIELD


def is_dead_end_error(exc: BaseException) -> bool:
    """:func:`is_layout_dead_end` of an exception (an engine :class:`ScenarioError` carries field and code)."""
    return is_layout_dead_end(field=str(getattr(exc, "field", "") or ""), code=str(getattr(exc, "code", "") or ""))


def gpu_count_advice(*, document: Mapping[str, Any], catalog: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Nearest workable GPU counts for a document whose GPU count has no layout (None when it has one)."""
    try:
        advice = nearest_workable_gpus(dict(document), catalog=dict(catalog) if catalog is not None else None)
    except (ScenarioError, ValueError, TypeError, KeyError):
        return None  # the document has another problem; its own error says which
    return None if advice.workable else advice.to_dict()


def run_advice(*, run: SimulationRun) -> dict[str, Any] | None:
    """For a run that failed because no layout can use its GPUs: why, and the nearest counts that work."""
    if run.status != RunStatus.FAILED or not is_layout_dead_end(field=run.error_field):
        return None
    snap = run.input_snapshot or {}
    document = snap.get("document")
    if not isinstance(document, Mapping):
        return None
    return gpu_count_advice(document=document, catalog=snap.get("catalog_values"))


#: run kinds whose result carries a step-model prediction (its ``notes``): at the top, or under ``performance``
_PERFORMANCE_AT = {"predict": (), "search": (), "tco": ("performance",)}


def with_sizing_note(*, kind: str, document: Mapping[str, Any], catalog: Mapping[str, Any] | None,
                     result: dict[str, Any]) -> dict[str, Any]:
    """The run result with the awkward-size note (GPU count and batch that factor badly, and the nearest sizes and
    batches that factor well with their predicted MFU) appended to its prediction's ``notes``; unchanged when the
    size factors well, the kind has no prediction, or the document has another problem (its own error says which)."""
    path = _PERFORMANCE_AT.get(str(kind))
    block: Any = result
    for key in path or ():
        block = block.get(key) if isinstance(block, dict) else None
    if path is None or not isinstance(block, dict) or not isinstance(block.get("notes"), list):
        return result
    mfu, chosen = block.get("mfu"), block.get("parallelism")
    try:
        advice = sizing_advice(dict(document), dict(catalog) if catalog is not None else None,
                               mfu=float(mfu) if isinstance(mfu, (int, float)) else None,
                               chosen=chosen if isinstance(chosen, Mapping) else None)
    except (ScenarioError, ValueError, TypeError, KeyError):
        return result
    if advice is not None:
        block["notes"].append(advice.message())
    return result
