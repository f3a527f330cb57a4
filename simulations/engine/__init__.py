"""Fabric Planner simulation engine: pure Python + numpy, no Django.

Public entry points::

    from simulations.engine import predict, search, tco

``predict(scenario)`` / ``search(scenario, top_k=5)`` live in :mod:`simulations.engine.perf`;
``tco(scenario)`` lives in :mod:`simulations.engine.tco` (the package attribute ``tco`` is the function;
import the module as ``import simulations.engine.tco`` or via ``sys.modules`` if you need it).
"""

from __future__ import annotations

ENGINE_VERSION = "1.0.0"

# registers the calibration extension points (simulations.engine.extensions) used by perf and scenario
from simulations.engine import calibration as _calibration  # noqa: E402,F401
from simulations.engine.perf import predict, search  # noqa: E402
from simulations.engine.tco import tco  # noqa: E402

__all__ = ["ENGINE_VERSION", "predict", "search", "tco"]
