"""Refit hooks: how leave-one-source-out sets a row-derived constant again without the held-out source's rows.

Each hook (registry.RowDerivedConstant.refit) is a context manager entered with the runs of every source but one
(loso.py). It picks the constant's calibration rows among them — the rows of the reference set
(``published_runs.json``) that the constant's stated source names, on its GPU family and precision — and
solves for the value that makes those rows unbiased: the mean of log(measured / predicted per-GPU throughput)
over them is 0 (a geometric-mean fit, the way the constants were set by hand). The value holds while the block
runs and is put back after. When the held-out source is not one of the constant's sources the calibration rows
are the original ones and the constant keeps its value (no work is done).

Solving: per-GPU throughput rises monotonically with a GEMM efficiency; the mean log
residual is driven to 0 by secant steps on log(value) (at most :data:`MAX_STEPS` evaluations of the rows, to
:data:`TOLERANCE`), the value kept inside its physical bounds.

Fallbacks with no calibration row left (every source of the constant held out):
* Hopper fp8 (one source, NeMo 24.07): the refit bf16 efficiency times the ratio of the two formats' best
  measured GEMM fractions of peak on H100 (components/gemm.json gemm-0019 fp8 1,402.6 / 1,979 against
  gemm-0004 bf16 794.5 / 989: 0.709 / 0.803 = 0.88) — a component measurement, not a row.
* Otherwise the constant keeps its value (said in docs/validation.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from engine.performance import hardware as hw
from engine.validation.rows import validation_rows
from engine.validation.runs import DEFAULT_RUNS, source_key

# sets a constant from the given runs (scenario + measured + source) while the with-block runs
RefitHook = Callable[[Sequence[dict[str, Any]]], AbstractContextManager[None]]

TOLERANCE = 0.002  # |mean log residual| at which a refit stops (0.2% of throughput)
MAX_STEPS = 5  # row evaluations per refit at most
# H100 best-shape GEMM fraction of peak, fp8 over bf16 (components/gemm.json gemm-0019 and gemm-0004)
H100_FP8_OVER_BF16 = (1402.6 / 1979.0) / (794.5 / 989.0)
EFF_BOUNDS = (0.2, 0.95)  # a sustained GEMM fraction of peak is never outside these


def reference_ids() -> frozenset[str]:
    """Ids of the reference set's runs: the rows the hand-set constants were calibrated on."""
    doc = json.loads(DEFAULT_RUNS.read_text(encoding="utf-8"))
    return frozenset(str(r["id"]) for r in doc["runs"])


def _family(run: dict[str, Any]) -> str:
    spec = hw.gpu_spec(str(run["scenario"]["cluster"]["gpu"]))
    return spec.family


def _precision(run: dict[str, Any]) -> str:
    return str(run["scenario"].get("training", {}).get("precision", "bf16"))


def calibration_rows(runs: Sequence[dict[str, Any]], sources: Sequence[str], *, family: str | None = None,
                     precision: str | None = None) -> list[dict[str, Any]]:
    """The reference-set runs among ``runs`` from ``sources`` (runs.source_key), on ``family`` and ``precision``."""
    ref = reference_ids()
    keys = {source_key(s) for s in sources}
    return [r for r in runs if str(r["id"]) in ref and source_key(r.get("source", "")) in keys
            and (family is None or _family(r) == family) and (precision is None or _precision(r) == precision)]


def mean_log_residual(runs: Sequence[dict[str, Any]]) -> float:
    """Mean log(measured / predicted per-GPU throughput) of ``runs`` under the constants now in force."""
    rows = validation_rows(list(runs))
    residuals = [r.residual for r in rows if math.isfinite(r.residual)]
    return sum(residuals) / len(residuals) if residuals else 0.0


def solve(set_value: Callable[[float], None], start: float, residual: Callable[[], float],
          bounds: tuple[float, float]) -> float:
    """The value in ``bounds`` at which ``residual()`` (a mean log residual that falls as the value rises, read
    after ``set_value``) is 0, by secant steps on log(value); the value found is left set."""
    lo, hi = bounds
    x0 = min(max(start, lo), hi)
    set_value(x0)
    f0 = residual()
    if abs(f0) < TOLERANCE:
        return x0
    x1 = min(max(x0 * math.exp(f0), lo), hi)  # throughput about proportional to the value: the first step
    for _ in range(MAX_STEPS - 1):
        set_value(x1)
        f1 = residual()
        if abs(f1) < TOLERANCE or (x1 in (lo, hi) and f1 * (1 if x1 == hi else -1) > 0):
            return x1
        slope = (f1 - f0) / (math.log(x1) - math.log(x0)) if x1 != x0 else 0.0
        step = -f1 / slope if slope < 0 else f1  # residual falls as the value rises; else a plain step
        x0, f0 = x1, f1
        x1 = min(max(x1 * math.exp(step), lo), hi)
    set_value(x1)
    return x1


@contextmanager
def _family_constants(changes: dict[tuple[str, str], float]) -> Iterator[None]:
    saved = {k: hw.FAMILY_CONSTANTS[k[0]][k[1]] for k in changes}
    try:
        for (fam, key), value in changes.items():
            hw.FAMILY_CONSTANTS[fam][key] = value
        yield
    finally:
        for (fam, key), value in saved.items():
            hw.FAMILY_CONSTANTS[fam][key] = value


def _setter(family: str, key: str, followers: Sequence[str] = ()) -> Callable[[float], None]:
    def set_value(value: float) -> None:
        for fam in (family, *followers):
            hw.FAMILY_CONSTANTS[fam][key] = value
    return set_value


def gemm_eff_refit(family: str, key: str, precision: str, sources: Sequence[str],
                   followers: Sequence[str] = ()) -> RefitHook:
    """Refit ``FAMILY_CONSTANTS[family][key]`` (and the same key of the ``followers`` families, which carry it
    over) on the calibration rows left in the runs given."""
    all_sources = tuple(sources)

    @contextmanager
    def hook(runs: Sequence[dict[str, Any]]) -> Iterator[None]:
        held = {(fam, key): hw.FAMILY_CONSTANTS[fam][key] for fam in (family, *followers)}
        left = {source_key(r.get("source", "")) for r in runs}
        if all(source_key(s) in left for s in all_sources):
            yield  # the constant's own rows are all there: it keeps its value
            return
        with _family_constants(held):
            rows = calibration_rows(runs, all_sources, family=family, precision=precision)
            if rows:
                solve(_setter(family, key, followers), held[(family, key)], lambda: mean_log_residual(rows),
                      EFF_BOUNDS)
            elif key == "gemm_eff_fp8" and family == "hopper":
                _setter(family, key, followers)(hw.FAMILY_CONSTANTS["hopper"]["gemm_eff_bf16"] * H100_FP8_OVER_BF16)
            yield
    return hook


def family_constant(family: str, key: str) -> Callable[[], float]:
    """A reader of ``FAMILY_CONSTANTS[family][key]`` as it stands (the value a refit set, inside its block)."""
    return lambda: float(hw.FAMILY_CONSTANTS[family][key])


@contextmanager
def noop_refit(runs: Sequence[dict[str, Any]]) -> Iterator[None]:
    """A constant that follows another's refit (Blackwell carries Hopper's GEMM efficiencies)."""
    del runs
    yield
