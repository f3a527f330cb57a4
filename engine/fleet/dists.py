"""Sampling of the plan's distributions (vectorized, one numpy Generator per replication)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from engine.fleet.plan import Dist


def sample(dist: Dist, n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """``n`` draws. lognormal: ``mean`` is the distribution's mean, ``sigma`` the underlying normal's, so
    ``mu = ln(mean) - sigma^2 / 2``; choice: ``values`` with ``weights``; empirical: ``values`` resampled uniformly."""
    if n <= 0:
        return np.zeros(0)
    if dist.kind == "const":
        return np.full(n, dist.mean)
    if dist.kind == "exponential":
        return rng.exponential(dist.mean, n)
    if dist.kind == "lognormal":
        mu = math.log(dist.mean) - dist.sigma ** 2 / 2.0
        return rng.lognormal(mu, dist.sigma, n)
    values = np.asarray(dist.values, dtype=float)
    if dist.kind == "choice":
        w = np.asarray(dist.weights, dtype=float)
        return values[rng.choice(len(values), size=n, p=w / w.sum())]
    return values[rng.integers(0, len(values), n)]
