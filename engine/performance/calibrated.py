"""A fleet's calibration profile applied to the performance model: the context it changes, the note and the
residual factor a result carries (what ``predict(..., calibration=overlay)`` takes).

Formerly the first half of the calibration package's ``apply``; the predictions live there still.

``predict_calibrated(scenario, profile)`` is :func:`engine.performance.api.predict` with the profile's
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

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.performance.context import Context
from engine.performance.result import Result
from engine.schema.calibration import Profile, check_calibration_section
from engine.schema.types import ScenarioSpec

R = TypeVar("R", bound=Result)
CONTEXT_FIELDS = frozenset(f.name for f in dataclasses.fields(Context))


def precision_key(ctx: Context) -> str:
    """The GEMM efficiency a run uses: fp8 only when asked for and the GPU has fp8 tensor cores."""
    return "fp8" if ctx.precision == "fp8" and ctx.gpu.peak_fp8_flops is not None else "bf16"


def apply_profile(profile: Profile, ctx: Context, *, network: bool = True, gemm: bool = True) -> Context:
    """``ctx`` with this profile's parameters (see module doc); the residual factor is not in here."""
    g = ctx.gpu
    changes: dict[str, Any] = {}
    gpu_changes: dict[str, Any] = {}
    if network and profile.collectives:
        scale = dict(ctx.net_bw_scale)
        scale.update(profile.net_bw_scale())
        changes["net_bw_scale"] = scale
        alpha = profile.net_alpha_s()
        if alpha is not None:
            changes["net_alpha_s"] = alpha
        s_ar, s_ring = profile.nvlink_scale(nvls=g.nvlink_ar_eff > g.nvlink_ring_eff)
        gpu_changes["nvlink_ar_eff"] = g.nvlink_ar_eff * s_ar
        gpu_changes["nvlink_ring_eff"] = g.nvlink_ring_eff * s_ring
    if network and gemm and profile.residual and "step_time_scale" in CONTEXT_FIELDS:
        changes["step_time_scale"] = float(profile.residual["factor"])
    if gemm:
        if "bf16" in profile.gemm:
            gpu_changes["gemm_eff_bf16"] = float(profile.gemm["bf16"]["eff"])
        if "fp8" in profile.gemm:
            gpu_changes["gemm_eff_fp8"] = float(profile.gemm["fp8"]["eff"])
    if gpu_changes:
        changes["gpu"] = dataclasses.replace(g, **gpu_changes)
    return dataclasses.replace(ctx, **changes) if changes else ctx


class ProfileMismatch(ScenarioError):
    """The scenario's hardware is not the profile's fleet (and it was not asked to borrow).

    A ScenarioError naming ``calibration``: the API answers 400, never 500."""

    def __init__(self, message: str) -> None:
        super().__init__("calibration", message)


def fleet_differences(profile: Profile, s: ScenarioSpec) -> dict[str, tuple[Any, Any]]:
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
    """Step time x factor; the rates and fractions derived from it / factor (a layout that does not fit has none)."""
    if not r.fits or r.step_time_s is None:
        return r
    assert r.tokens_per_s is not None and r.tokens_per_s_per_gpu is not None and r.mfu is not None
    assert r.model_tflops_per_gpu is not None and r.hardware_tflops_per_gpu is not None and r.hfu is not None
    assert r.time_to_train_days is not None and r.gpu_hours is not None and r.breakdown_s is not None
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
    """What :func:`engine.performance.api.predict` takes as ``calibration=``: the profile's parts that apply
    to this scenario (``apply_to_context``), the note the result carries, and the residual factor."""

    profile: Profile
    network: bool = True
    gemm: bool = True
    notes: tuple[str, ...] = ()

    def apply_to_context(self, ctx: Context) -> Context:
        return apply_profile(self.profile, ctx, network=self.network, gemm=self.gemm)

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


def overlay_for(scenario: Mapping[str, Any] | ScenarioSpec, profile: Profile | Mapping[str, Any],
                catalog: CatalogItems | None = None, *, borrow: bool | str = False) -> Overlay:
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


def overlay_from_scenario(s: ScenarioSpec, catalog: CatalogItems | None = None) -> Overlay | None:
    """The overlay of the profile a scenario document carries under ``calibration`` (None without one).

    ``{"borrow": true}`` in that section borrows it onto other hardware (see :func:`overlay_for`)."""
    section = s.extras.get("calibration")
    if section is None:
        return None
    prof = check_calibration_section(section)
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
