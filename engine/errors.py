"""The engine's error base, in a module of its own so that every engine package (the schema's bounds, the
document parser, fabric sizing, the performance search) can raise it without an import circle.

A :class:`ScenarioError` names the offending field, says why in words, and carries a machine ``code`` (one of
the constants below) so that callers decide what to do from the code, never from the wording of the message.
"""

from __future__ import annotations

from typing import Any

# --- machine codes (stable strings: API clients may read them beside the message) ---------------------------
INVALID = "invalid"  # the generic code: the value breaks a rule that has no code of its own
REQUIRED = "required"  # a required key is missing
UNKNOWN_KEY = "unknown_key"  # a key the document format does not have
WRONG_TYPE = "wrong_type"  # e.g. a string where a number is needed, a boolean where an integer is needed
OUT_OF_RANGE = "out_of_range"  # a number outside its bound (engine.schema.bounds), or not finite
NOT_A_CHOICE = "not_a_choice"  # a value that is not one of the field's choices (engine.schema.enums)
UNKNOWN_CATALOG_KEY = "unknown_catalog_key"  # a catalog key that is not in the catalog (or of another kind)
LAYOUT_CONFLICT = "layout_conflict"  # given parallel degrees that cannot go together on this model and cluster
NO_LAYOUT = "no_layout"  # no parallel layout at all can use the cluster as given (a dead end: change the GPU count)
UNBUILDABLE_FABRIC = "unbuildable_fabric"  # the fabric cannot be built as asked (size, switch, routing, SHARP)
WORK_LIMIT = "work_limit"  # the inputs would enumerate more work than the budget allows

CODES = (INVALID, REQUIRED, UNKNOWN_KEY, WRONG_TYPE, OUT_OF_RANGE, NOT_A_CHOICE, UNKNOWN_CATALOG_KEY,
         LAYOUT_CONFLICT, NO_LAYOUT, UNBUILDABLE_FABRIC, WORK_LIMIT)


class ScenarioError(ValueError):
    """Invalid scenario; ``str(err)`` is ``"field.path: message"``; ``err.code`` is a machine code (:data:`CODES`)."""

    default_code = INVALID

    def __init__(self, field: str, message: str, code: str | None = None) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.code = code or self.default_code

    def __reduce__(self) -> tuple[Any, ...]:  # pickles with its field, message and code (the args are one string)
        return type(self), (self.field, self.message, self.code)
