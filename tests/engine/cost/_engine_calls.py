"""Count the engine's expensive steps during one action (issue #21: parse once, size once, predict once).

``engine_calls()`` wraps, at the defining module and at every loaded module that imported it by name:

* ``engine.document.parse.parse_scenario`` — ``parses``: calls given a document (a call given an already
  parsed ``ScenarioSpec`` returns it as is; those are counted apart, as ``passthrough``);
* ``engine.fabric.sizing.size_fabric`` — ``sizings``: the fabric sizing itself (switches, optics, cables),
  whoever asks for it (the parser's topology, or a cost model that would size again);
* ``engine.performance.model.evaluate`` — ``evaluations``: one vectorised run of the performance model.

Modules named in ``preload`` (and the engine's own users of these functions) are imported first, so that no
import site is loaded, unwrapped, in the middle of the count.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

ENGINE_USERS = (
    "engine.document.parse", "engine.document.validate", "engine.fabric.topology", "engine.performance.api",
    "engine.performance.model", "engine.performance.calibrated", "engine.performance.advice",
    "engine.cost.costing", "engine.cost.tco", "engine.cost.uncertainty",
)


@dataclass
class EngineCalls:
    parses: int = 0
    passthrough: int = 0
    sizings: int = 0
    evaluations: int = 0

    def counts(self) -> tuple[int, int, int]:
        """(parses, sizings, model evaluations)."""
        return self.parses, self.sizings, self.evaluations

    def __str__(self) -> str:
        return (f"{self.parses} parse(s), {self.sizings} fabric sizing(s), {self.evaluations} model evaluation(s)"
                f" (+{self.passthrough} parse call(s) given an already parsed ScenarioSpec)")


@contextmanager
def engine_calls(*preload: str) -> Iterator[EngineCalls]:
    """Count parses, fabric sizings and performance-model evaluations inside the ``with`` block."""
    for name in (*ENGINE_USERS, *preload):
        importlib.import_module(name)
    from engine.document import parse
    from engine.fabric import sizing
    from engine.performance import model
    from engine.schema.types import ScenarioSpec

    calls = EngineCalls()
    # plans on the default catalog are memoised by their inputs; start cold so every sizing of this block counts
    sizing._default_plan.cache_clear()

    def counted_parse(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(doc: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(doc, ScenarioSpec):
                calls.passthrough += 1
            else:
                calls.parses += 1
            return original(doc, *args, **kwargs)

        return wrapper

    def counted(original: Callable[..., Any], field: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            setattr(calls, field, getattr(calls, field) + 1)
            return original(*args, **kwargs)

        return wrapper

    wrappers: dict[int, tuple[Any, Callable[..., Any]]] = {
        id(original): (original, wrapper) for original, wrapper in (
            (parse.parse_scenario, counted_parse(parse.parse_scenario)),
            (sizing.size_fabric, counted(sizing.size_fabric, "sizings")),
            (model.evaluate, counted(model.evaluate, "evaluations")),
        )
    }
    patched: list[tuple[Any, str, Any]] = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            found = wrappers.get(id(value))
            if found is not None and found[0] is value:
                patched.append((module, attr, value))
                setattr(module, attr, found[1])
    try:
        yield calls
    finally:
        for module, attr, value in reversed(patched):
            setattr(module, attr, value)
