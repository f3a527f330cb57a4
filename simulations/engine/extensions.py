"""Extension points the engine's core calls without importing the packages that fill them.

The calibration package (:mod:`simulations.engine.calibration`) builds on perf (it fits and predicts with
it), yet perf must apply the profile a scenario document carries. To keep every arrow pointing one way (no
import circle between sibling modules), perf and scenario call the functions registered here, and the
calibration package registers them when it is imported - which ``simulations/engine/__init__.py`` does, so
they are in place whenever any engine module is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_check: Callable[[Any], None] | None = None
_overlay: Callable[[Any, Any], Any] | None = None


def register_calibration(check: Callable[[Any], None], overlay: Callable[[Any, Any], Any]) -> None:
    """``check(section)`` validates a document's ``calibration`` section (raises ScenarioError);
    ``overlay(scenario, catalog)`` returns what perf applies (``apply_to_context``, ``finish``) or None."""
    global _check, _overlay
    _check, _overlay = check, overlay


def check_calibration(section: Any) -> None:
    if _check is not None:
        _check(section)


def document_calibration(scenario: Any, catalog: Any) -> Any:
    """The overlay of the profile ``scenario`` carries (None without one)."""
    if _overlay is None or not scenario.extras.get("calibration"):
        return None
    return _overlay(scenario, catalog)
