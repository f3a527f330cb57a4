"""Predictions with a fleet's calibration profile applied.

``predict_calibrated(scenario, profile)`` is :func:`simulations.engine.perf.predict` with the profile's
parameters in the engine's Context (same candidate layouts, same model, same result type) and the residual
factor, if the profile has one, on the step time. The result's notes name the profile and its version.

A profile belongs to one fleet: the GPU model, fabric and NIC speed it was measured on. A scenario on other
hardware is refused unless it borrows the profile (``borrow=True``): then only what transfers is applied -
the network part when the fabric and NIC speed match, the GEMM part when the GPU model matches - and the
notes say what was borrowed and what was not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from simulations.engine.calibration.profile import Profile
from simulations.engine.catalog import Catalog
from simulations.engine.hardware import gpu_spec
from simulations.engine.model import evaluate, make_context
from simulations.engine.perf import Result, _result_at, candidate_layouts
from simulations.engine.scenario import Scenario, parse_scenario


class ProfileMismatch(ValueError):
    """The scenario's hardware is not the profile's fleet (and it was not asked to borrow)."""


def fleet_differences(profile: Profile, s: Scenario) -> dict[str, tuple[Any, Any]]:
    """Fields where the scenario's cluster differs from the profile's fleet: {field: (fleet, scenario)}."""
    f = profile.fleet
    c = s.cluster
    out: dict[str, tuple[Any, Any]] = {}
    if f.get("gpu") != c.gpu:
        out["gpu"] = (f.get("gpu"), c.gpu)
    if f.get("fabric", "infiniband") != c.fabric:
        out["fabric"] = (f.get("fabric", "infiniband"), c.fabric)
    if f.get("nic_gbps") is not None and float(f["nic_gbps"]) != float(c.nic_gbps):
        out["nic_gbps"] = (f.get("nic_gbps"), c.nic_gbps)
    return out


def _scale_result(r: Result, factor: float) -> Result:
    """Step time x factor; the rates and fractions derived from it / factor."""
    return dataclasses.replace(
        r,
        step_time_s=r.step_time_s * factor, tokens_per_s=r.tokens_per_s / factor,
        tokens_per_s_per_gpu=r.tokens_per_s_per_gpu / factor,
        model_tflops_per_gpu=r.model_tflops_per_gpu / factor,
        hardware_tflops_per_gpu=r.hardware_tflops_per_gpu / factor, mfu=r.mfu / factor, hfu=r.hfu / factor,
        time_to_train_days=r.time_to_train_days * factor, gpu_hours=r.gpu_hours * factor,
        breakdown_s={k: v * factor for k, v in r.breakdown_s.items()},
        notes=list(r.notes),
    )


def predict_calibrated(scenario: Mapping[str, Any] | Scenario, profile: Profile | Mapping[str, Any],
                       catalog: Catalog | None = None, *, borrow: bool = False) -> Result:
    """:func:`predict` with ``profile`` applied (a :class:`Profile` or its ``to_dict()``)."""
    prof = profile if isinstance(profile, Profile) else Profile.from_dict(profile)
    s = parse_scenario(scenario, catalog)
    diff = fleet_differences(prof, s)
    notes: list[str] = []
    network = gemm = True
    if diff:
        what = ", ".join(f"{k} {a} vs {b}" for k, (a, b) in diff.items())
        if not borrow:
            raise ProfileMismatch(f"calibration: {prof.label()} was fitted on other hardware ({what}); "
                                  "borrow it explicitly or predict without it")
        network = "fabric" not in diff and "nic_gbps" not in diff
        gemm = "gpu" not in diff
        applied = [p for p, ok in (("network", network), ("GEMM efficiency", gemm)) if ok]
        notes.append(f"borrowed {prof.label()} from fleet {prof.fleet.get('gpu')} ({what}); applied: "
                     f"{', '.join(applied) or 'nothing'}")
    ctx = prof.apply_to_context(make_context(s, gpu_spec(s.cluster.gpu, catalog)), network=network, gemm=gemm)
    lay = candidate_layouts(s)
    out = evaluate(ctx, lay)
    fits = out["fits"] > 0.5
    i = int(np.lexsort((out["memory_bytes"], out["step_time_s"], ~fits))[0]) if len(lay) > 1 else 0
    r = _result_at(s, ctx, lay, out, i)
    if len(lay) > 1 and not fits.any():
        r.notes.append("no candidate layout fits in memory; showing the fastest one regardless")
    factor = prof.residual_factor if (network and gemm) else 1.0
    if factor != 1.0:
        r = _scale_result(r, factor)
        notes.append(f"residual factor {factor:.3f} of {prof.label()} applied to the step time")
    r.notes.extend(notes)
    r.notes.append(f"calibrated with {prof.label()}")
    return r
