"""Fabric Planner engine: the bottom layer of the house. Pure Python + numpy, no Django, no app.

One folder per concept (docs/architecture.md draws them; each folder has a README):

* :mod:`engine.schema` - the scenario document's types, enums, bounds and the calibration-profile record;
* :mod:`engine.catalog` - the default vendor catalog (hardware and cost figures with sources);
* :mod:`engine.fabric` - sizing the compute fabric, its parts, topology, routing and simulated tables;
* :mod:`engine.document` - reading (parse, validate) and writing the scenario document;
* :mod:`engine.performance` - the step-time model, its terms, ``predict`` and ``search``;
* :mod:`engine.cost` - TCO, goodput and uncertainty; :mod:`engine.flowsim`, :mod:`engine.fleet`,
  :mod:`engine.calibration`, :mod:`engine.validation` sit on top.

Public entry points (the package facade; code inside the project imports from the defining modules)::

    from engine import predict, search, tco
"""

from __future__ import annotations

from engine.cost.tco import tco
from engine.performance.api import predict, search
from engine.version import ENGINE_VERSION

__all__ = ["ENGINE_VERSION", "predict", "search", "tco"]
