"""Reading a stored run result: the one place that knows where its performance figures sit.

A predict or search run stores the performance record at the top level; a TCO run stores it under
``performance``. Everything that reads a stored result (the run page, charts, exports, the explain page) goes
through these two functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def performance_of(result: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The performance section of a TCO result, or the result itself for predict/search runs ({} for none)."""
    if not isinstance(result, Mapping):
        return {}
    perf = result.get("performance")
    return perf if isinstance(perf, Mapping) else result


def result_fits(result: Mapping[str, Any] | None) -> bool | None:
    """``False`` when the stored result says it does not fit in GPU memory, ``True`` when it fits, else None."""
    fits = performance_of(result).get("fits")
    return fits if isinstance(fits, bool) else None
