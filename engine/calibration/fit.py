"""``fit_profile``: least-squares fit of a fleet's efficiencies over the engine's own equations.

Three stages, each a small ``scipy.optimize.least_squares`` problem on log residuals (relative errors):

1. **Collectives** (nccl-tests files): per collective kind and scope, ``eta`` (bandwidth multiplier) and the
   latency parameter (see :mod:`.curves`), fitted to every row of every file of that kind/scope at once,
   each file through the model's curve for its own rank and node count.
2. **GEMM efficiency per precision** (step logs + the workload the user states): with stage 1 applied, the
   sustained GEMM fraction of peak (``GpuSpec.gemm_eff_bf16`` / ``gemm_eff_fp8``) that makes the model's
   step times match the measured ones, bounded by what dense GEMMs can reach (``GEMM_EFF_BOUNDS``).
3. **Residual factor**, only when stage 2 cannot explain the logs (an efficiency pinned at its physical
   bound, or a common-sign misfit well beyond the noise): one multiplier on the whole step time, fitted with
   the efficiencies held, and reported with the reason - never folded silently into another number.

Uncertainty: covariance ``(J^T J)^-1`` at the optimum (J = Jacobian of the weighted residuals), scaled by
the reduced chi-square when it exceeds 1 (the scatter the data really shows); one-sigma values on the
natural scale by the delta method. Round-trip tests check that synthetic data with known values are
recovered within these uncertainties.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from engine.calibration.curves import (
    KIND,
    busbw_gbytes_s,
    calibrated_time,
    fleet_context,
    model_alpha_s,
    model_time,
    scope_of,
)
from engine.calibration.runs import RunModel
from engine.catalog import CatalogItems
from engine.performance.calibrated import precision_key
from engine.schema.calibration import Profile
from engine.units import Arr

ETA_BOUNDS = (0.05, 3.0)  # bandwidth multiplier: below 5% or above 3x the model is a wrong fleet description
ALPHA_BOUNDS_S = (0.1e-6, 1e-3)
LAM_BOUNDS = (0.05, 50.0)
# Sustained dense-GEMM fraction of peak: above 0.90 no cuBLAS/cuBLASLt kernel sustains it (an 8192^3 bf16
# matmul reaches ~0.81 of H100 peak at boost clock, A100 0.8-0.9, hardware.py); below 0.10 the GPU is
# not doing the GEMMs the workload says it does.
GEMM_EFF_BOUNDS = (0.10, 0.90)
# The engine is not exact: a 2% per-run model floor keeps one very steady log from dominating the fit.
MODEL_FLOOR_REL = 0.02
RESIDUAL_CHI2 = 4.0  # reduced chi-square above which a common-sign misfit asks for the residual factor


def _cov(jac: Arr, resid: Arr, n_par: int, weighted: bool = True) -> tuple[Arr, float]:
    """Covariance of the parameters and the reduced chi-square.

    ``weighted``: residuals are divided by their standard errors, so ``(J^T J)^-1`` is the covariance,
    scaled up by the reduced chi-square when the data scatter more than their errors say. Unweighted
    (relative residuals of equal, unknown error): scaled by the residual variance ``RSS / dof``.
    """
    dof = resid.size - n_par
    chi2 = float(resid @ resid) / dof if dof > 0 else float("nan")
    jtj = jac.T @ jac
    try:
        cov = np.linalg.inv(jtj)
    except np.linalg.LinAlgError:
        cov = np.linalg.pinv(jtj)
    if dof > 0 and (chi2 > 1.0 or not weighted):
        cov = cov * chi2
    return np.asarray(cov, dtype=np.float64), chi2


def _source_label(data: Mapping[str, Any], i: int) -> str:
    return str(data.get("label") or data.get("name") or f"{data.get('collective', 'nccl-tests')}#{i + 1}")


def fit_collectives(cluster: Mapping[str, Any], nccl: Sequence[Mapping[str, Any]],
                    catalog: CatalogItems | None = None) -> list[dict[str, Any]]:
    """Stage 1: one entry per (collective, scope) with the fitted parameters, sigmas and plot curves."""
    gpn = int(cluster.get("gpus_per_node", 8))
    groups: dict[tuple[str, str], list[tuple[int, Mapping[str, Any], int]]] = {}
    for i, data in enumerate(nccl):
        ranks = data.get("ranks")
        if not isinstance(ranks, int) or ranks < 2:
            raise ValueError(f"nccl[{i}].ranks: the file has no device list; give ranks (>= 2) for "
                             f"{_source_label(data, i)}")
        collective = str(data.get("collective"))
        if collective not in KIND:
            raise ValueError(f"nccl[{i}].collective: unknown {collective!r}")
        nodes = data.get("nodes")
        scope = scope_of(ranks, nodes if isinstance(nodes, int) else None, gpn)
        groups.setdefault((collective, scope), []).append((i, data, ranks))
    if not groups:
        return []
    ctx = fleet_context(cluster, catalog, min_gpus=max(r for g in groups.values() for _, _, r in g))
    out: list[dict[str, Any]] = []
    for (collective, scope), members in sorted(groups.items()):
        kind = KIND[collective]
        sizes = [np.asarray([r["size_bytes"] for r in d["rows"]], dtype=np.float64) for _, d, _ in members]
        times = [np.asarray([r["time_us"] for r in d["rows"]], dtype=np.float64) * 1e-6 for _, d, _ in members]
        if scope == "inter":
            lat0 = model_alpha_s(ctx, members[0][2])
            lo, hi = ALPHA_BOUNDS_S
        else:
            lat0 = 1.0
            lo, hi = LAM_BOUNDS

        def resid(p: Arr, _m: list[tuple[int, Mapping[str, Any], int]] = members, _k: str = kind,
                  _s: str = scope, _sz: list[Arr] = sizes, _t: list[Arr] = times) -> Arr:
            eta, lat = math.exp(p[0]), math.exp(p[1])
            parts = [np.log(calibrated_time(ctx, _k, _s, sz, r, eta, lat) / t)
                     for (_, _, r), sz, t in zip(_m, _sz, _t, strict=True)]
            return np.concatenate(parts)

        # start from the ratio of measured to modelled bandwidth at the largest messages (the model's
        # min(NVLink, NIC) makes eta = 1 a kink where a one-sided derivative can be zero)
        ratios = []
        for (_, _, r), sz, t in zip(members, sizes, times, strict=True):
            big = sz >= 0.5 * sz.max()
            ratios.append(float(np.median(model_time(ctx, kind, sz[big], r) / t[big])))
        eta0 = min(max(float(np.median(ratios)), ETA_BOUNDS[0] * 1.01), ETA_BOUNDS[1] * 0.99)
        x0 = np.asarray([math.log(eta0), math.log(min(max(lat0, lo * 1.01), hi * 0.99))])
        bounds = ([math.log(ETA_BOUNDS[0]), math.log(lo)], [math.log(ETA_BOUNDS[1]), math.log(hi)])
        sol = least_squares(resid, x0, bounds=bounds, x_scale="jac", diff_step=1e-4, method="trf",
                            jac="3-point")
        cov, _ = _cov(sol.jac, sol.fun, 2, weighted=False)
        eta, lat = math.exp(sol.x[0]), math.exp(sol.x[1])
        sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
        rms = float(np.sqrt(np.mean(sol.fun ** 2)))
        entry: dict[str, Any] = {
            "collective": collective, "kind": kind, "scope": scope,
            "eta": eta, "eta_sigma": eta * float(sd[0]),
            "points": int(sol.fun.size), "rms_rel_error": rms,
            "at_bound": bool(np.any(np.isclose(sol.x, bounds[0], atol=1e-6))
                             or np.any(np.isclose(sol.x, bounds[1], atol=1e-6))),
            "sources": [],
        }
        if scope == "inter":
            entry.update(alpha_us=lat * 1e6, alpha_us_sigma=lat * float(sd[1]) * 1e6, model_alpha_us=lat0 * 1e6)
        else:
            entry.update(latency_scale=lat, latency_scale_sigma=lat * float(sd[1]))
        rms_before = []
        for (i, data, ranks), sz, t in zip(members, sizes, times, strict=True):
            before = model_time(ctx, kind, sz, ranks)
            after = calibrated_time(ctx, kind, scope, sz, ranks, eta, lat)
            rms_before.append(np.log(before / t))
            order = np.argsort(sz, kind="stable")
            entry["sources"].append({
                "label": _source_label(data, i), "ranks": ranks, "nodes": data.get("nodes"),
                "nccl_version": data.get("nccl_version"), "rows": int(sz.size),
                "curve": {
                    "size_bytes": [int(x) for x in sz[order]],
                    "in_place": [bool(data["rows"][j]["in_place"]) for j in order],
                    "measured_busbw_gbytes_s": [float(x) for x in busbw_gbytes_s(collective, ranks, sz, t)[order]],
                    "model_busbw_gbytes_s": [float(x) for x in busbw_gbytes_s(collective, ranks, sz, before)[order]],
                    "calibrated_busbw_gbytes_s": [float(x) for x in
                                                  busbw_gbytes_s(collective, ranks, sz, after)[order]],
                },
                "peak_busbw_gbytes_s": {
                    "measured": float(np.max(busbw_gbytes_s(collective, ranks, sz, t))),
                    "model": float(np.max(busbw_gbytes_s(collective, ranks, sz, before))),
                    "calibrated": float(np.max(busbw_gbytes_s(collective, ranks, sz, after))),
                },
            })
        entry["rms_rel_error_before"] = float(np.sqrt(np.mean(np.concatenate(rms_before) ** 2)))
        out.append(entry)
    return out


def _run_inputs(runs: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any], float, float, dict[str, Any]]]:
    items = []
    for i, run in enumerate(runs):
        rid = str(run.get("id") or f"run-{i + 1}")
        if "scenario" not in run:
            raise ValueError(f"runs[{i}].scenario: the workload and layout of the run are required")
        log = run.get("step_log")
        if log is not None:
            measured = float(log["step_time_s"])
            sem = log.get("step_time_sem_rel")
            sem = float(sem) if sem is not None and math.isfinite(float(sem)) else 0.0
            info = {"format": log.get("format"), "steps_used": log.get("steps_used"),
                    "warmup_excluded": list(log.get("warmup_excluded") or []), "notes": list(log.get("notes") or [])}
        elif run.get("step_time_s") is not None:
            measured = float(run["step_time_s"])
            sem = float(run.get("sigma_rel") or 0.0)
            info = {"format": "value"}
        else:
            raise ValueError(f"runs[{i}]: give step_log (a parse_step_log result) or step_time_s")
        if not (math.isfinite(measured) and measured > 0):
            raise ValueError(f"runs[{i}].step_time_s: must be > 0, got {measured!r}")
        items.append((rid, run["scenario"], measured, sem, info))
    return items


def fit_profile(fleet: Mapping[str, Any], nccl: Sequence[Mapping[str, Any]] = (),
                runs: Sequence[Mapping[str, Any]] = (), *, name: str = "", catalog: CatalogItems | None = None,
                fit_residual: bool | None = None) -> Profile:
    """Fit a fleet's calibration profile.

    ``fleet``: the fleet's scenario ``cluster`` section (gpu, gpus, gpus_per_node, nic_gbps, fabric, ...).
    ``nccl``: results of :func:`parse_nccl_tests` (``ranks`` may be added by hand when the file had no device
    list; ``label`` names the file). ``runs``: ``[{"id", "scenario": <scenario document of the run, layout as
    it ran>, "step_log": <parse_step_log result>}]`` (or ``"step_time_s"`` instead of ``step_log``).
    ``fit_residual``: None = only when needed (see module doc), True/False to force.
    """
    if not isinstance(fleet, Mapping) or "gpu" not in fleet:
        raise ValueError("fleet: a scenario cluster section with at least 'gpu' is required")
    if not nccl and not runs:
        raise ValueError("nccl: nothing to fit: give nccl-tests results and/or step logs of runs")
    colls = fit_collectives(fleet, nccl, catalog)
    prof = Profile(fleet=dict(fleet), name=name, collectives=colls)
    items = _run_inputs(runs)
    if not items:
        prof.notes.append("no step logs: GEMM efficiency keeps the engine's defaults")
        return prof
    models = [RunModel(rid, doc, catalog, prof) for rid, doc, _, _, _ in items]
    measured = np.asarray([m for _, _, m, _, _ in items])
    sigma = np.sqrt(np.asarray([s for _, _, _, s, _ in items]) ** 2 + MODEL_FLOOR_REL ** 2)
    keys = sorted({precision_key(m.ctx0) for m in models})
    defaults = {k: next(m.default_gemm() for m in models if precision_key(m.ctx0) == k) for k in keys}
    before = np.asarray([m.step_time(None, None, network=False) for m in models])

    def r_gemm(p: Arr) -> Arr:
        eff = dict(zip(keys, p, strict=True))
        pred = np.asarray([m.step_time(eff, None) for m in models])
        return np.asarray(np.log(pred / measured) / sigma, dtype=np.float64)

    lo, hi = GEMM_EFF_BOUNDS
    x0 = np.asarray([min(max(defaults[k], lo + 1e-3), hi - 1e-3) for k in keys])
    sol = least_squares(r_gemm, x0, bounds=([lo] * len(keys), [hi] * len(keys)), diff_step=1e-4)
    cov, chi2 = _cov(sol.jac, sol.fun, len(keys))
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    pinned = [k for k, v in zip(keys, sol.x, strict=True) if v <= lo + 1e-4 or v >= hi - 1e-4]
    for j, k in enumerate(keys):
        used = [rid for (rid, _, _, _, _), m in zip(items, models, strict=True) if precision_key(m.ctx0) == k]
        prof.gemm[k] = {"eff": float(sol.x[j]), "sigma": float(sd[j]), "default": float(defaults[k]),
                        "runs": used, "at_bound": k in pinned}
    resid_rel = np.log(np.asarray([m.step_time({k: v["eff"] for k, v in prof.gemm.items()}, None) for m in models])
                       / measured)
    mean = float(np.mean(resid_rel))
    common = len(items) > 1 and abs(mean) > 2.0 * float(np.std(resid_rel, ddof=1)) / math.sqrt(len(items))
    need = bool(pinned) or (bool(np.isfinite(chi2)) and chi2 > RESIDUAL_CHI2 and common)
    if fit_residual is not None:
        need = fit_residual
    if need:
        eff = {k: v["eff"] for k, v in prof.gemm.items()}

        def r_res(p: Arr) -> Arr:
            pred = np.asarray([m.step_time(eff, None) for m in models]) * math.exp(p[0])
            return np.asarray(np.log(pred / measured) / sigma, dtype=np.float64)

        sol_r = least_squares(r_res, np.zeros(1), diff_step=1e-4)
        cov_r, _ = _cov(sol_r.jac, sol_r.fun, 1)
        factor = math.exp(float(sol_r.x[0]))
        reason = (f"GEMM efficiency for {', '.join(pinned)} hit its physical bound {GEMM_EFF_BOUNDS}" if pinned else
                  f"a common-sign misfit of {mean:+.1%} (reduced chi-square {chi2:.1f}) remained" if fit_residual is None
                  else "asked for")
        prof.residual = {"factor": factor, "sigma": factor * math.sqrt(float(cov_r[0, 0])), "reason": reason,
                         "note": "multiplies every predicted step time on this fleet: the engine's equations do "
                                 "not explain this part of the measured time"}
        prof.notes.append(f"residual factor {factor:.3f} applied: {reason}")
    else:
        prof.notes.append(f"no residual factor: GEMM efficiency and collectives explain the step logs "
                          f"(rms {float(np.sqrt(np.mean(resid_rel ** 2))):.1%})")
    after = np.asarray([m.step_time(None, prof) for m in models])
    prof.runs = []
    for (rid, _doc, meas, sem, info), m, b, a in zip(items, models, before, after, strict=True):
        prof.runs.append({"id": rid, "measured_step_time_s": float(meas), "measured_sem_rel": float(sem),
                          "predicted_before_s": float(b), "predicted_after_s": float(a),
                          "error_before": float(b / meas - 1.0), "error_after": float(a / meas - 1.0),
                          "precision": precision_key(m.ctx0), "layout": m.layout, "log": info,
                          "notes": list(m.notes)})
    prof.gemm_fit = {"reduced_chi2": chi2, "points": len(items), "model_floor_rel": MODEL_FLOOR_REL}
    return dataclasses.replace(prof)
