"""Predictions with a fleet's calibration profile applied.

``predict_calibrated(scenario, profile)`` is :func:`simulations.engine.perf.predict` with the profile's
parameters in the engine's Context (``predict(..., calibration=overlay)``: same candidate layouts, same
model, same result type) and the residual factor, if the profile has one, on the step time. The result's
notes name the profile and its version. ``search_calibrated`` does the same for the search.

A profile belongs to one fleet: the GPU model, fabric and NIC speed it was measured on. A scenario on other
hardware is refused unless it borrows the profile (``borrow=True``): then only what transfers is applied -
the network part when the fabric and NIC speed match, the GEMM part when the GPU model matches - and the
notes say what was borrowed and what was not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from simulations.engine.calibration.profile import CONTEXT_FIELDS, Profile, check_document_calibration
from simulations.engine.catalog import Catalog
from simulations.engine.errors import ScenarioError
from simulations.engine.model import Context
from simulations.engine.perf import Result, SearchResult, predict, search
from simulations.engine.scenario import Scenario, parse_scenario

R = TypeVar("R", bound=Result)


class ProfileMismatch(ScenarioError):
    """The scenario's hardware is not the profile's fleet (and it was not asked to borrow).

    A ScenarioError naming ``calibration``: the API answers 400, never 500."""

    def __init__(self, message: str) -> None:
        super().__init__("calibration", message)


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


def scale_result(r: R, factor: float) -> R:
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


@dataclass(frozen=True)
class Overlay:
    """What :func:`simulations.engine.perf.predict` takes as ``calibration=``: the profile's parts that apply
    to this scenario (``apply_to_context``), the note the result carries, and the residual factor."""

    profile: Profile
    network: bool = True
    gemm: bool = True
    notes: tuple[str, ...] = ()

    def apply_to_context(self, ctx: Context) -> Context:
        return self.profile.apply_to_context(ctx, network=self.network, gemm=self.gemm)

    @property
    def residual_factor(self) -> float:
        """The factor still to apply to a result (1.0 when the engine's Context already carried it)."""
        if "step_time_scale" in CONTEXT_FIELDS:
            return 1.0
        return self.profile.residual_factor if (self.network and self.gemm) else 1.0

    @property
    def note(self) -> str:
        return f"calibrated with {self.profile.label()}"

    def finish(self, result: R) -> R:
        """What perf.predict / search call on every result they return: the residual factor (when the
        Context could not carry it) and the notes naming the profile."""
        return _finish(result, self)

    def predict(self, scenario: Mapping[str, Any] | Scenario, catalog: Catalog | None = None) -> Result:
        """``perf.predict`` with this overlay (perf applies it and calls :meth:`finish`)."""
        return predict(scenario, catalog, calibration=self)

    def search(self, scenario: Mapping[str, Any] | Scenario, top_k: int = 5,
               catalog: Catalog | None = None) -> SearchResult:
        return search(scenario, top_k, catalog, calibration=self)


def overlay_for(scenario: Mapping[str, Any] | Scenario, profile: Profile | Mapping[str, Any],
                catalog: Catalog | None = None, *, borrow: bool | str = False) -> Overlay:
    """The overlay of ``profile`` for ``scenario``; :class:`ProfileMismatch` on other hardware unless borrowed."""
    prof = profile if isinstance(profile, Profile) else Profile.from_dict(profile)
    s = parse_scenario(scenario, catalog)
    diff = fleet_differences(prof, s)
    if not diff:
        return Overlay(prof)
    what = ", ".join(f"{k} {a} vs {b}" for k, (a, b) in diff.items())
    if not borrow:
        raise ProfileMismatch(f"{prof.label()} was fitted on other hardware ({what}); "
                              "borrow it explicitly or predict without it")
    network = "fabric" not in diff and "nic_gbps" not in diff
    gemm = "gpu" not in diff
    applied = [p for p, ok in (("network", network), ("GEMM efficiency", gemm)) if ok]
    done = ", ".join(applied) or "nothing"
    if borrow is True or borrow == "borrowed":
        note = f"borrowed {prof.label()} from fleet {prof.fleet.get('gpu')} ({what}); applied: {done}"
    else:
        note = f"{prof.label()} was measured on other hardware ({what}); applied: {done}"
    return Overlay(prof, network=network, gemm=gemm, notes=(note,))


def overlay_from_scenario(s: Scenario, catalog: Catalog | None = None) -> Overlay | None:
    """The overlay of the profile a scenario document carries under ``calibration`` (None without one).

    ``{"borrow": true}`` in that section borrows it onto other hardware (see :func:`overlay_for`)."""
    section = s.extras.get("calibration")
    if section is None:
        return None
    prof = check_document_calibration(section)
    # A document on hardware other than the profile's (a borrowed profile, or a fleet scenario whose cluster
    # overrides change the GPU, fabric or NIC speed) gets what transfers, and the notes say so - never an error.
    return overlay_for(s, prof, catalog, borrow="borrowed" if section.get("borrow") else "fleet")


def _finish(r: R, ov: Overlay) -> R:
    factor = ov.residual_factor
    out = scale_result(r, factor) if factor != 1.0 else r
    extra = list(ov.notes)
    total = ov.profile.residual_factor if (ov.network and ov.gemm) else 1.0
    if total != 1.0:
        extra.append(f"residual factor {total:.3f} of {ov.profile.label()} applied to the step time")
    # perf appends the overlay's note ("calibrated with ...") itself; keep it last
    notes = [n for n in out.notes if n != ov.note] + extra + [ov.note]
    return dataclasses.replace(out, notes=notes)


def predict_calibrated(scenario: Mapping[str, Any] | Scenario, profile: Profile | Mapping[str, Any],
                       catalog: Catalog | None = None, *, borrow: bool = False) -> Result:
    """:func:`predict` with ``profile`` applied (a :class:`Profile` or its ``to_dict()``)."""
    s = parse_scenario(scenario, catalog)
    return overlay_for(s, profile, catalog, borrow=borrow).predict(s, catalog)


def search_calibrated(scenario: Mapping[str, Any] | Scenario, profile: Profile | Mapping[str, Any], top_k: int = 5,
                      catalog: Catalog | None = None, *, borrow: bool = False) -> SearchResult:
    """:func:`search` with ``profile`` applied; the residual factor scales the winner and every alternative."""
    s = parse_scenario(scenario, catalog)
    return overlay_for(s, profile, catalog, borrow=borrow).search(s, top_k, catalog)
