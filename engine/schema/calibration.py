"""A fleet's calibration profile as a record: fitted values with uncertainty and the data behind them.

How a profile is applied to the performance model is :func:`engine.performance.calibrated.apply_profile`;

A profile changes only parameters the engine already has (no curve tables, no per-run fudge):

* across nodes, per collective kind: ``Context.net_bw_scale[kind] = eta``; kinds without their own
  nccl-tests file take the inverse-variance mean of the measured kinds (same NICs, same fabric), and the
  per-step network latency ``Context.net_alpha_s`` = the (log-)mean of the fitted latencies;
* inside a node: ``GpuSpec.nvlink_ar_eff`` x eta(all-reduce), ``nvlink_ring_eff`` x mean eta(other kinds);
* GEMM: ``GpuSpec.gemm_eff_bf16`` / ``gemm_eff_fp8`` = the fitted sustained fractions of peak;
* the residual factor, when the fit needed one, multiplies the predicted step time (and divides the rates):
  ``Context.step_time_scale`` when the engine has it, else on the result (``apply.scale_result``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ScenarioError

PROFILE_FORMAT = 1
NET_KINDS = ("ar", "ag", "rs", "a2a", "p2p")


def finite_json(obj: Any) -> Any:
    """``obj`` with NaN / infinite floats as None and numpy scalars as Python numbers (strict JSON)."""
    if isinstance(obj, Mapping):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str | int):
        return obj
    if isinstance(obj, float) or hasattr(obj, "__float__"):
        f = float(obj)
        return f if math.isfinite(f) else None
    return obj



def _wmean(values: list[tuple[float, float]], log: bool = False) -> float | None:
    """Inverse-variance weighted mean of (value, sigma) pairs (in log space when ``log``)."""
    if not values:
        return None
    num = den = 0.0
    for v, s in values:
        rel = s / v if v > 0 else 1.0
        w = 1.0 / max(rel, 1e-3) ** 2
        num += w * (math.log(v) if log else v)
        den += w
    mean = num / den
    return math.exp(mean) if log else mean


@dataclass
class Profile:
    """Result of :func:`fit_profile`; ``to_dict()`` / ``Profile.from_dict()`` for storage."""

    fleet: dict[str, Any]
    name: str = ""
    version: int | None = None  # set by the platform when it stores the profile
    collectives: list[dict[str, Any]] = field(default_factory=list)
    gemm: dict[str, dict[str, Any]] = field(default_factory=dict)
    residual: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gemm_fit: dict[str, Any] = field(default_factory=dict)

    # ---------------------------------------------------------------------------------------- derived
    def net_bw_scale(self) -> dict[str, float]:
        inter = [c for c in self.collectives if c["scope"] == "inter"]
        scale = {c["kind"]: float(c["eta"]) for c in inter}
        mean = _wmean([(float(c["eta"]), float(c["eta_sigma"])) for c in inter])
        if mean is not None:
            for k in NET_KINDS:
                scale.setdefault(k, mean)
        return scale

    def net_alpha_s(self) -> float | None:
        inter = [c for c in self.collectives if c["scope"] == "inter" and "alpha_us" in c]
        mean = _wmean([(float(c["alpha_us"]), float(c["alpha_us_sigma"])) for c in inter], log=True)
        return None if mean is None else mean * 1e-6

    def nvlink_scale(self, nvls: bool = True) -> tuple[float, float]:
        """(all-reduce, ring) multipliers on the NVLink efficiencies. Without NVLS the all-reduce inside a
        node is a ring too: every intra-node kind then informs one multiplier, applied to both."""
        intra = [c for c in self.collectives if c["scope"] == "intra"]
        ar = [(float(c["eta"]), float(c["eta_sigma"])) for c in intra if c["kind"] == "ar"]
        ring = [(float(c["eta"]), float(c["eta_sigma"])) for c in intra if c["kind"] != "ar"]
        if not nvls:
            both = _wmean(ar + ring) or 1.0
            return both, both
        return _wmean(ar) or 1.0, _wmean(ring) or 1.0

    @property
    def residual_factor(self) -> float:
        return float(self.residual["factor"]) if self.residual else 1.0

    def label(self) -> str:
        v = f" v{self.version}" if self.version is not None else ""
        return f"{self.name or 'calibration profile'}{v}"

    # ------------------------------------------------------------------------------------ (de)serialise
    def summary(self) -> dict[str, Any]:
        """The fitted values only (what a result records about the profile it used)."""
        return {
            "name": self.name, "version": self.version,
            "collectives": [{k: c[k] for k in c if k not in ("sources",)} for c in self.collectives],
            "gemm": {k: {kk: v[kk] for kk in ("eff", "sigma", "default")} for k, v in self.gemm.items()},
            "residual": self.residual,
        }

    def compact(self) -> dict[str, Any]:
        """What a scenario document carries under ``calibration``: the fitted values only (no curves, no runs)."""
        return finite_json({
            "format": PROFILE_FORMAT, "name": self.name, "version": self.version, "fleet": dict(self.fleet),
            "collectives": [{k: v for k, v in c.items() if k != "sources"} for c in self.collectives],
            "gemm": {k: {kk: v[kk] for kk in ("eff", "sigma", "default") if kk in v} for k, v in self.gemm.items()},
            "residual": self.residual})

    def to_dict(self) -> dict[str, Any]:
        return finite_json({
            "format": PROFILE_FORMAT, "name": self.name, "version": self.version, "fleet": dict(self.fleet),
            "collectives": self.collectives, "gemm": self.gemm, "residual": self.residual, "runs": self.runs,
            "notes": list(self.notes), "gemm_fit": self.gemm_fit})

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Profile:
        """Rebuild a stored profile, checking the fields :meth:`apply_to_context` reads."""
        if not isinstance(doc, Mapping):
            raise ValueError("profile: must be an object")
        if doc.get("format") != PROFILE_FORMAT:
            raise ValueError(f"profile.format: expected {PROFILE_FORMAT}, got {doc.get('format')!r}")
        fleet = doc.get("fleet")
        if not isinstance(fleet, Mapping) or not isinstance(fleet.get("gpu"), str):
            raise ValueError("profile.fleet: a cluster section with 'gpu' is required")
        colls = list(doc.get("collectives") or [])
        for i, c in enumerate(colls):
            for key in ("kind", "scope", "eta", "eta_sigma"):
                if key not in c:
                    raise ValueError(f"profile.collectives[{i}].{key}: is required")
            if c["kind"] not in NET_KINDS or c["scope"] not in ("intra", "inter"):
                raise ValueError(f"profile.collectives[{i}]: unknown kind/scope {c['kind']!r}/{c['scope']!r}")
            if not (isinstance(c["eta"], int | float) and 0.0 < float(c["eta"]) < 10.0):
                raise ValueError(f"profile.collectives[{i}].eta: must be in (0, 10)")
        gemm = dict(doc.get("gemm") or {})
        for k, v in gemm.items():
            if k not in ("bf16", "fp8") or not isinstance(v, Mapping):
                raise ValueError(f"profile.gemm.{k}: unknown precision or not an object")
            if not (isinstance(v.get("eff"), int | float) and 0.0 < float(v["eff"]) <= 1.0):
                raise ValueError(f"profile.gemm.{k}.eff: must be in (0, 1]")
        residual = doc.get("residual")
        if residual is not None and not (isinstance(residual, Mapping) and isinstance(residual.get("factor"), int | float)
                                         and 0.1 < float(residual["factor"]) < 10.0):
            raise ValueError("profile.residual.factor: must be a number in (0.1, 10)")
        version = doc.get("version")
        return cls(fleet=dict(fleet), name=str(doc.get("name") or ""),
                   version=int(version) if isinstance(version, int) else None, collectives=colls, gemm=gemm,
                   residual=dict(residual) if residual else None, runs=list(doc.get("runs") or []),
                   notes=list(doc.get("notes") or []), gemm_fit=dict(doc.get("gemm_fit") or {}))


def check_document_calibration(section: Any) -> Profile:
    """Validate a scenario document's ``calibration`` section (a compact or full profile, plus an optional
    ``borrow`` flag); ``ValueError("calibration.<field>: ...")`` when it is not one."""
    if not isinstance(section, Mapping):
        raise ValueError("calibration: must be an object (a calibration profile)")
    body = {k: v for k, v in section.items() if k != "borrow"}
    if "borrow" in section and not isinstance(section["borrow"], bool):
        raise ValueError("calibration.borrow: must be true or false")
    try:
        return Profile.from_dict(body)
    except ValueError as exc:
        msg = str(exc)
        raise ValueError("calibration" + msg[len("profile"):] if msg.startswith("profile") else msg) from None


def check_calibration_section(section: object) -> Profile:
    """The document's ``calibration`` section as a :class:`Profile`; :class:`ScenarioError` naming the field."""
    try:
        return check_document_calibration(section)
    except ValueError as exc:
        field_, _, message = str(exc).partition(": ")
        raise ScenarioError(field_ or "calibration", message or str(exc)) from None
