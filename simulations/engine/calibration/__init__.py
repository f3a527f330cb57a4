"""Calibration on a team's own cluster: import nccl-tests output and training logs, fit the fleet's
efficiencies over the engine's own equations, and predict with them.

Contract (issue #16)::

    from simulations.engine.calibration import parse_nccl_tests, parse_step_log, fit_profile

* :func:`parse_nccl_tests` - nccl-tests stdout -> collective, ranks, rows (out-of-place and in-place).
* :func:`parse_step_log` - Megatron-LM / NeMo / torchtitan / CSV step logs -> steady step time, warm-up dropped.
* :func:`parse_gpu_telemetry` - nvidia-smi CSV / dcgmi dmon -> mean power and SM activity (optional).
* :func:`fit_profile` - least-squares fit -> :class:`Profile` (values, uncertainty, data, residual factor).
* :func:`predict_calibrated` - predict() with a profile applied; ``Profile.apply_to_context`` is the hook.

Method and equations: docs/calibration.md. Pure Python + numpy/scipy; no Django.
"""

from __future__ import annotations

from simulations.engine.calibration.apply import (
    Overlay,
    ProfileMismatch,
    fleet_differences,
    overlay_for,
    overlay_from_scenario,
    predict_calibrated,
    search_calibrated,
)
from simulations.engine.calibration.fit import fit_profile
from simulations.engine.calibration.manifest import fit_manifest, load_manifest
from simulations.engine.calibration.nccl import COLLECTIVES, parse_nccl_tests
from simulations.engine.calibration.profile import Profile, check_document_calibration, finite_json
from simulations.engine.calibration.steplog import parse_step_log
from simulations.engine.calibration.telemetry import parse_gpu_telemetry
from simulations.engine.errors import ScenarioError
from simulations.engine.extensions import register_calibration

__all__ = [
    "COLLECTIVES",
    "Overlay",
    "Profile",
    "ProfileMismatch",
    "check_document_calibration",
    "finite_json",
    "fit_manifest",
    "fit_profile",
    "fleet_differences",
    "load_manifest",
    "overlay_for",
    "overlay_from_scenario",
    "parse_gpu_telemetry",
    "parse_nccl_tests",
    "parse_step_log",
    "predict_calibrated",
    "search_calibrated",
]


def _check_section(section: object) -> None:
    try:
        check_document_calibration(section)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise ScenarioError(field or "calibration", message or str(exc)) from None


register_calibration(_check_section, overlay_from_scenario)
