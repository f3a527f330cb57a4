"""Fabric Planner simulation engine: pure Python + numpy, no Django.

Public entry points::

    from simulations.engine import predict, search, tco

``predict(scenario)`` / ``search(scenario, top_k=5)`` live in :mod:`simulations.engine.perf`;
``tco(scenario)`` lives in :mod:`simulations.engine.tco`.
"""

from __future__ import annotations

from typing import Any

ENGINE_VERSION = "1.0.0"

__all__ = ["ENGINE_VERSION", "predict", "search", "tco"]


def __getattr__(name: str) -> Any:
    # Lazy re-exports keep ``import simulations.engine.catalog`` cheap and avoid import cycles
    # between the performance and cost modules.
    if name in ("predict", "search"):
        from simulations.engine import perf

        return getattr(perf, name)
    if name == "tco":
        from simulations.engine import tco as tco_module

        return tco_module.tco
    raise AttributeError(name)
