"""Goodput: interruptions from per-component failure rates, checkpoint/restart overhead, effective training time.

Pure Python + numpy (no Django). Every function accepts floats or numpy arrays (Monte Carlo) and broadcasts.

Model
-----
* Interruptions per day ``λ = s * Σ_c n_c * r_c`` over components ``c`` (GPU, HBM, host, software, NIC, switch,
  transceiver, cable) with ``n_c`` the part count of the job (GPUs, nodes, NICs and the fabric's switches, optics and
  cables from :mod:`engine.fabric.sizing`) and ``r_c`` the per-unit-day rate in ``data/reliability.json``;
  ``s`` is an optional scale (``costs.goodput.failure_rate_scale``). Mean time to interrupt ``M = 24/λ`` hours.
* Checkpoint write time ``δ = params * bytes_per_param / min(storage write bandwidth, nodes * per-node write)``.
* Checkpoint interval: Daly's higher-order optimum ``τ = sqrt(2δM) * (1 + sqrt(δ/(2M))/3 + δ/(18M)) - δ``
  (``τ = M`` when ``δ >= 2M``); Young's ``sqrt(2δM)`` is its first term.
* Effective training fraction ``f = τ/(τ+δ) * (1 - (R + (τ+δ)/2) / M)`` with restart time ``R``: each interruption
  costs the restart plus, on average, half an interval of lost work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.catalog import CatalogError, CatalogItems, items_of_kind
from engine.document.parse import parse_model
from engine.performance.attention_widths import attention_widths
from engine.performance.terms.flops import MTP_PROJECTION_INPUTS_PER_H
from engine.schema.types import FloatLike

COMPONENT_UNITS = {
    "gpu": "gpu",
    "hbm": "gpu",
    "host": "node",
    "software": "node",
    "nic": "nic",
    "switch": "switch",
    "transceiver": "transceiver",
    "cable": "cable",
}


@dataclass(frozen=True)
class ReliabilityModel:
    rates: dict[str, float]  # component -> interruptions per unit-day
    per: dict[str, str]  # component -> unit it is counted in
    restart_min: float
    checkpoint_bytes_per_param: float
    storage_write_gbytes_per_s: float
    node_write_gbytes_per_s: float
    sources: dict[str, str]


def load_reliability(catalog: CatalogItems | None = None) -> ReliabilityModel:
    """Read the ``reliability`` items of the catalog."""
    rates: dict[str, float] = {}
    per: dict[str, str] = {}
    sources: dict[str, str] = {}
    recovery: dict[str, Any] | None = None
    for key, item in items_of_kind("reliability", catalog).items():
        specs = item.get("specs") or {}
        comp = specs.get("component")
        if comp == "recovery":
            recovery = dict(specs)
            sources["recovery"] = str(item.get("source", ""))
            continue
        if comp not in COMPONENT_UNITS:
            raise CatalogError(f"catalog.{key}", f"unknown reliability component {comp!r}")
        rate = float(specs.get("rate_per_unit_day", 0.0))
        if rate < 0:
            raise CatalogError(f"catalog.{key}", f"rate_per_unit_day must be >= 0, got {rate}")
        rates[comp] = rate
        per[comp] = str(specs.get("per", COMPONENT_UNITS[comp]))
        sources[comp] = str(item.get("source", ""))
    if recovery is None:
        raise CatalogError("catalog", "no reliability item with component 'recovery'")
    return ReliabilityModel(
        rates=rates,
        per=per,
        restart_min=float(recovery.get("restart_min", 10.0)),
        checkpoint_bytes_per_param=float(recovery.get("checkpoint_bytes_per_param", 14.0)),
        storage_write_gbytes_per_s=float(recovery.get("storage_write_gbytes_per_s", 2000.0)),
        node_write_gbytes_per_s=float(recovery.get("node_write_gbytes_per_s", 25.0)),
        sources=sources,
    )


def part_counts(gpus: int, nodes: int, nics: int, switches: int, transceivers: int, cables: int) -> dict[str, float]:
    """Unit counts keyed by the ``per`` names used in reliability.json."""
    return {
        "gpu": float(gpus),
        "node": float(nodes),
        "nic": float(nics),
        "switch": float(switches),
        "transceiver": float(transceivers),
        "cable": float(cables),
    }


def interruptions_by_component(counts: Mapping[str, float], model: ReliabilityModel) -> dict[str, float]:
    """Expected unexpected interruptions per day, by component, at scale 1."""
    out: dict[str, float] = {}
    for comp, rate in model.rates.items():
        out[comp] = rate * float(counts.get(model.per[comp], 0.0))
    return out


def daly_interval_s(ckpt_s: FloatLike, mtti_s: FloatLike) -> FloatLike:
    """Daly's higher-order optimal checkpoint interval (compute time between checkpoints), seconds."""
    d = np.asarray(ckpt_s, dtype=float)
    m = np.asarray(mtti_s, dtype=float)
    ratio = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(ratio) / 3.0 + d / (18.0 * m)) - d
    tau = np.where(d >= 2.0 * m, m, tau)
    tau = np.maximum(tau, 1e-9)
    return _out(tau)


def effective_fraction(interval_s: FloatLike, ckpt_s: FloatLike, restart_s: FloatLike, mtti_s: FloatLike) -> FloatLike:
    """Fraction of wall time that advances training."""
    tau = np.asarray(interval_s, dtype=float)
    d = np.asarray(ckpt_s, dtype=float)
    r = np.asarray(restart_s, dtype=float)
    m = np.asarray(mtti_s, dtype=float)
    f = tau / (tau + d) * (1.0 - (r + (tau + d) / 2.0) / m)
    return _out(np.clip(f, 0.0, 1.0))


def _out(x: npt.NDArray[np.float64]) -> FloatLike:
    return float(x) if x.ndim == 0 else x


def goodput_arrays(rate_per_day: FloatLike, checkpoint_bytes: FloatLike, write_gbytes_per_s: FloatLike,
                   restart_min: FloatLike, interval_min: FloatLike | None = None) -> dict[str, FloatLike]:
    """Vectorized goodput figures from an interruption rate and checkpoint/restart inputs."""
    lam = np.maximum(np.asarray(rate_per_day, dtype=float), 1e-12)
    mtti_s = 86400.0 / lam
    ckpt_s = np.asarray(checkpoint_bytes, dtype=float) / (np.asarray(write_gbytes_per_s, dtype=float) * 1e9)
    tau = np.asarray(daly_interval_s(ckpt_s, mtti_s), dtype=float)
    if interval_min is not None:
        tau = np.broadcast_to(np.asarray(interval_min, dtype=float) * 60.0, np.broadcast(tau, ckpt_s).shape).copy()
    frac = effective_fraction(tau, ckpt_s, np.asarray(restart_min, dtype=float) * 60.0, mtti_s)
    return {
        "interruptions_per_day": _out(lam),
        "mean_time_to_interrupt_h": _out(mtti_s / 3600.0),
        "checkpoint_write_s": _out(np.asarray(ckpt_s)),
        "checkpoint_interval_min": _out(tau / 60.0),
        "effective_training_fraction": frac,
    }


def param_count(model: Mapping[str, Any]) -> float:
    """Parameters of a decoder-only transformer from a scenario ``model`` section (dense or MoE), with its
    multi-token-prediction modules (``mtp_layers``: each a layer of the last layer's kind and a 2h x h projection; the
    embedding and output head are shared, so a checkpoint stores them once)."""
    hidden = float(model["hidden"])
    layers = int(model["layers"])
    vocab = float(model["vocab"])
    ffn = float(model.get("ffn_hidden", 4 * hidden))
    gated = bool(model.get("gated_ffn", False))
    mats = 3.0 if gated else 2.0
    widths = attention_widths(parse_model(model))  # Q, K, V and output (head_dim, GQA, MLA): the step model's count
    attn = widths.sharded_macs + widths.replicated_macs
    moe = model.get("moe")
    if moe:
        experts = float(moe["experts"])
        shared = float(moe.get("shared_experts", 0))
        eff = float(moe["expert_ffn_hidden"])
        dense_layers = int(moe.get("dense_layers", 0))
        dense_ffn = float(moe.get("dense_ffn_hidden", 4 * hidden))
        moe_mlp = (experts + shared) * mats * hidden * eff + hidden * experts
        mlp_total = (layers - dense_layers) * moe_mlp + dense_layers * mats * hidden * dense_ffn
        last_mlp = moe_mlp
    else:
        mlp_total = layers * mats * hidden * ffn
        last_mlp = mats * hidden * ffn
    mtp = float(model.get("mtp_layers") or 0) * (attn + last_mlp + MTP_PROJECTION_INPUTS_PER_H * hidden * hidden)
    return layers * attn + mlp_total + 2.0 * vocab * hidden + mtp


@dataclass(frozen=True)
class GoodputInputs:
    gpus: int
    nodes: int
    nics: int
    switches: int
    transceivers: int
    cables: int
    params: float


def goodput(inputs: GoodputInputs, catalog: CatalogItems | None = None, overrides: Mapping[str, Any] | None = None
            ) -> dict[str, Any]:
    """Deterministic goodput section (plus a per-component breakdown).

    ``overrides`` (``costs.goodput``): failure_rate_scale, restart_min, checkpoint_bytes_per_param,
    storage_write_gbytes_per_s, node_write_gbytes_per_s, checkpoint_interval_min.
    """
    model = load_reliability(catalog)
    ov = dict(overrides or {})
    counts = part_counts(inputs.gpus, inputs.nodes, inputs.nics, inputs.switches, inputs.transceivers, inputs.cables)
    by_comp = interruptions_by_component(counts, model)
    scale = float(ov.get("failure_rate_scale", 1.0))
    rate = scale * sum(by_comp.values())
    write = min(float(ov.get("storage_write_gbytes_per_s", model.storage_write_gbytes_per_s)),
                inputs.nodes * float(ov.get("node_write_gbytes_per_s", model.node_write_gbytes_per_s)))
    ckpt_bytes = inputs.params * float(ov.get("checkpoint_bytes_per_param", model.checkpoint_bytes_per_param))
    interval = ov.get("checkpoint_interval_min")
    g = goodput_arrays(rate, ckpt_bytes, write, float(ov.get("restart_min", model.restart_min)),
                       None if interval is None else float(interval))
    out: dict[str, Any] = {k: float(v) for k, v in g.items()}
    out["interruptions_by_component_per_day"] = {k: scale * v for k, v in by_comp.items()}
    out["checkpoint_gb"] = ckpt_bytes / 1e9
    out["restart_min"] = float(ov.get("restart_min", model.restart_min))
    return out
