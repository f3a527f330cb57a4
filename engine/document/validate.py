"""Validate a whole scenario document without running it.

Save-time validation is the parser itself (:func:`engine.document.parse.parse_scenario`): the very
checks ``predict`` and ``tco`` apply before computing — structure and values against the bounds table, ranges
(low <= likely <= high), the ``costs`` section, catalog keys, and the fabric sizing (an unbuildable fabric or a
routing mode the switch lacks) — so the platform refuses a bad scenario at save time with the field named,
rather than at run time. What needs the GPU's tensor cores or the whole layout space (a precision the GPU lacks, a
framework that cannot run a fixed setting, no layout, a search over the limit) is
:func:`engine.performance.api.check_runnable`, a layer above this one; the platform's save calls both
(``planning.services.documents.document_validate``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError


def validate_scenario(scenario: Mapping[str, Any], catalog: CatalogItems | None = None) -> None:
    """Raise ScenarioError (a ValueError with ``.field``) if ``scenario`` is invalid."""
    if not isinstance(scenario, Mapping):
        raise ScenarioError("scenario", f"must be an object, got {type(scenario).__name__}")
    parse_scenario(scenario, catalog=catalog)
