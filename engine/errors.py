"""The engine's error base, in a module of its own so that :mod:`.bounds` and :mod:`.scenario` can both use it
without an import circle (``from engine.document.parse import ScenarioError`` keeps working)."""

from __future__ import annotations


class ScenarioError(ValueError):
    """Invalid scenario; ``str(err)`` is ``"field.path: message"``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
