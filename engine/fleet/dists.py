"""Random numbers of a replication: the plan's distributions, and one stream per named source.

Common random numbers: every source of randomness (a stream's arrival times, its job sizes, its durations, a
job's failures) draws from its own generator, derived from ``(seed, kind, name, occurrence)`` by hashing the
name into a :class:`numpy.random.SeedSequence` spawn key. The same seed therefore gives the same arrivals,
sizes, durations and failure draws whatever else the plan holds: adding a cluster, a purchase option or
another stream does not shift any other stream's draws, so options differ by what they change, not by luck.

A job's failure draws are a counter-based stream (SplitMix64 of the job's 64-bit key and the draw's index):
segment ``k`` of a job (the stretch of work between two (re)starts) takes draw ``2k`` for its time to the
next interruption and draw ``2k + 1`` for whether that interruption takes a node out, on every option.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import numpy.typing as npt

from engine.fleet.plan import Dist

MASK64 = (1 << 64) - 1
GOLDEN64 = 0x9E3779B97F4A7C15
_UNIT = 2.0 ** -53


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


def _word(part: str | int) -> int:
    if isinstance(part, int):
        return part
    return int.from_bytes(hashlib.blake2b(part.encode("utf-8"), digest_size=8).digest(), "little")


def seed_sequence(seed: int, *parts: str | int) -> np.random.SeedSequence:
    """The seed sequence of one named source: ``(seed, parts...)``, independent of every other source."""
    return np.random.SeedSequence(seed, spawn_key=tuple(_word(p) for p in parts))


def generator(seed: int, *parts: str | int) -> np.random.Generator:
    """A PCG64 generator for one named source (``generator(seed, "sizes", "research", 0)``)."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *parts)))


def key64(seed: int, *parts: str | int) -> int:
    """A 64-bit key for one named source (a named job's failure stream)."""
    return int(seed_sequence(seed, *parts).generate_state(1, np.uint64)[0])


def keys64(seed: int, n: int, *parts: str | int) -> list[int]:
    """``n`` 64-bit keys for the numbered members of one source (the failure streams of a stream's jobs)."""
    if n <= 0:
        return []
    return [int(k) for k in generator(seed, *parts).bit_generator.random_raw(n)]


def _mix64(z: int) -> int:
    """SplitMix64's finaliser: a 64-bit integer to a well-mixed 64-bit integer."""
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & MASK64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & MASK64
    return z ^ (z >> 31)


def unit(key: int, index: int) -> float:
    """Draw ``index`` of the counter-based stream ``key``: uniform on the open interval (0, 1)."""
    return ((_mix64((key + (index + 1) * GOLDEN64) & MASK64) >> 11) + 0.5) * _UNIT


def exponential(key: int, index: int) -> float:
    """Draw ``index`` of stream ``key`` as a standard exponential (mean 1)."""
    return -math.log(unit(key, index))
