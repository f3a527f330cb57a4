"""Lookups in the simulated fabric tables (``engine/fabric/data/fabric_tables.json``, issue #13).

Kept apart from the simulator package (engine/flowsim, which sits above the performance model) so that the
routing share the performance model reads (:mod:`engine.fabric.routing`) comes from the fabric layer below it:
plain json + numpy, an in-memory index, microseconds per lookup. The tables and the experiment that fills them are
described in :mod:`engine.flowsim.tables` and docs/flowsim.md.
"""

from __future__ import annotations

import bisect
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

TABLE_PATH = Path(__file__).resolve().parent / "data" / "fabric_tables.json"


@lru_cache(maxsize=4)
def load_tables(path: str | None = None) -> dict[str, Any] | None:
    """The table document (cached), or None when it has not been generated."""
    p = Path(path) if path else TABLE_PATH
    if not p.exists():
        return None
    doc: dict[str, Any] = json.loads(p.read_text())
    return doc


@lru_cache(maxsize=4)
def _crossing_index(path: str | None = None) -> dict[str, tuple[list[float], list[float], dict[str, Any]]] | None:
    doc = load_tables(path)
    if not doc or "crossing" not in doc:
        return None
    out: dict[str, tuple[list[float], list[float], dict[str, Any]]] = {}
    for pattern, grids in doc["crossing"]["patterns"].items():
        for routing, grid in grids.items():
            out[f"{pattern}:{routing}"] = (list(grid["loads"]), list(grid["flows_per_nic"]), grid)
    return out


def _interp(xs: list[float], x: float) -> tuple[int, int, float]:
    if x <= xs[0]:
        return 0, 0, 0.0
    if x >= xs[-1]:
        return len(xs) - 1, len(xs) - 1, 0.0
    j = bisect.bisect_right(xs, x)
    i = j - 1
    return i, j, (x - xs[i]) / (xs[j] - xs[i])


def crossing_share_table(routing: str, load: float, flows_per_nic: float, stat: str = "mean",
                         pattern: str = "aligned", path: str | None = None) -> float | None:
    """Simulated share of line rate of crossing traffic (interpolated in load and log2 flows per NIC; outside
    the grid the nearest edge holds); None without a table or for a routing mode it does not hold."""
    out = crossing_share_array(routing, load, flows_per_nic, stat=stat, pattern=pattern, path=path)
    return None if out is None else float(out)


@lru_cache(maxsize=16)
def _grid_arrays(key: str, stat: str, path: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    idx = _crossing_index(path)
    if idx is None or key not in idx:
        return None
    loads, flows, grid = idx[key]
    return (np.asarray(loads, dtype=np.float64), np.log2(np.asarray(flows, dtype=np.float64)),
            np.asarray(grid[stat], dtype=np.float64))


def _axis(xs: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if xs.size == 1:
        zero = np.zeros(x.shape, dtype=np.int64)
        return zero, zero, np.zeros(x.shape)
    i = np.clip(np.searchsorted(xs, x, side="right") - 1, 0, xs.size - 2)
    a = np.clip((x - xs[i]) / (xs[i + 1] - xs[i]), 0.0, 1.0)
    return i, i + 1, a


_SCALAR_MAX = 8


@lru_cache(maxsize=16)
def _grid_lists(key: str, stat: str, path: str | None) -> tuple[list[float], list[float], list[list[float]]]:
    arrays = _grid_arrays(key, stat, path)
    assert arrays is not None
    loads, lflows, vals = arrays
    return loads.tolist(), lflows.tolist(), (vals * loads[:, None]).tolist()


def _bracket(xs: list[float], x: float) -> tuple[int, int, float]:
    if len(xs) == 1 or x <= xs[0]:
        return 0, 0, 0.0
    if x >= xs[-1]:
        return len(xs) - 1, len(xs) - 1, 0.0
    j = bisect.bisect_right(xs, x)
    return j - 1, j, (x - xs[j - 1]) / (xs[j] - xs[j - 1])


def _scalar(grid: tuple[list[float], list[float], list[list[float]]], load: float, flows: float) -> float:
    loads, lflows, carried = grid
    x = min(max(load, loads[0]), loads[-1])
    i0, i1, a = _bracket(loads, x)
    j0, j1, b = _bracket(lflows, math.log2(max(1.0, flows)))
    c = ((1 - a) * (1 - b) * carried[i0][j0] + a * (1 - b) * carried[i1][j0]
         + (1 - a) * b * carried[i0][j1] + a * b * carried[i1][j1])
    return c / x


def crossing_share_array(routing: str, load: Any, flows_per_nic: Any, stat: str = "mean",
                         pattern: str = "aligned", path: str | None = None) -> np.ndarray | None:
    """Vectorised :func:`crossing_share_table` (broadcasting ``load`` and ``flows_per_nic``); None without a
    table or for a routing mode it does not hold."""
    arrays = _grid_arrays(f"{pattern}:{routing}", stat, path)
    if arrays is None:
        return None
    loads, lflows, vals = arrays
    load_a = np.asarray(load, dtype=np.float64)
    flows_a = np.asarray(flows_per_nic, dtype=np.float64)
    if load_a.size <= _SCALAR_MAX and flows_a.size <= _SCALAR_MAX:  # predict: a few numbers, plain Python is faster
        lb, fb = np.broadcast_arrays(load_a, flows_a)
        grid = _grid_lists(f"{pattern}:{routing}", stat, path)
        return np.array([_scalar(grid, float(x), float(fl)) for x, fl in zip(lb.ravel().tolist(), fb.ravel().tolist(),
                                                                             strict=True)]).reshape(lb.shape)
    x, f = np.broadcast_arrays(load_a, np.log2(np.maximum(1.0, flows_a)))
    xc = np.clip(x, loads[0], loads[-1])  # outside the grid the edge share holds
    i0, i1, a = _axis(loads, xc)
    j0, j1, b = _axis(lflows, f)
    # interpolate the carried traffic (share x load), which the simulation gives monotone in load, not the share:
    # a straight line between two shares can dip the carried traffic between grid points
    carried = vals * loads[:, None]
    c = ((1 - a) * (1 - b) * carried[i0, j0] + a * (1 - b) * carried[i1, j0]
         + (1 - a) * b * carried[i0, j1] + a * b * carried[i1, j1])
    out: np.ndarray = c / xc
    return out


def study_efficiency(*, fabric: str, topology: str, gpus: int, oversubscription: float, routing: str,
                     traffic: str = "ring-allreduce", placement: str = "packed", stat: str = "p50",
                     path: str | None = None) -> float | None:
    """Simulated efficiency of a standard study, interpolated in log2(GPUs) between the sizes in the table and
    linearly in oversubscription; None when the table lacks the combination."""
    doc = load_tables(path)
    if not doc:
        return None
    rows = [r for r in doc.get("studies", {}).get("rows", [])
            if r["fabric"] == fabric and r["topology"] == topology and r["routing"] == routing
            and r["traffic"] == traffic and r["placement"] == placement and "efficiency" in r]
    if not rows:
        return None
    overs = sorted({float(r["oversubscription"]) for r in rows})
    o0, o1, b = _interp(overs, float(oversubscription))
    out = []
    for o in (overs[o0], overs[o1]):
        pts = sorted((int(r["gpus"]), float(r["efficiency"][stat])) for r in rows if float(r["oversubscription"]) == o)
        xs = [math.log2(g) for g, _ in pts]
        i, j, a = _interp(xs, math.log2(max(1, gpus)))
        out.append((1 - a) * pts[i][1] + a * pts[j][1])
    return float((1 - b) * out[0] + b * out[1])
