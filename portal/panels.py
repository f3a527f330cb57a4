"""What a planner must see first about a run: does it fit, which layout, which alternatives and why they lose.

Presentation only: every figure comes from the stored engine result (``fits``, ``memory_gb_per_gpu``,
``memory_limit_gb``, ``parallelism``, ``alternatives`` with ``why_it_loses``) or from the catalog values
the run snapshotted (the GPU's HBM). The rules (what fits, which layout wins) live in the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.schema.enums import Fabric, Routing
from simulations import metrics as registry
from simulations.results import performance_of, result_fits

#: words a failed run's error uses when the engine refused it for memory (tco refuses non-fitting runs)
NOT_FIT_WORDS = ("does not fit", "doesn't fit", "out of memory", "exceeds the gpu memory", "exceeds gpu memory")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


GIB_IN_GB = 2.0**30 / 1e9  # datasheet HBM sizes are binary: an "80 GB" H100 holds 80 GiB = 85.9 GB


def hbm_gb(run: Any, gpu: str | None) -> float | None:
    """The GPU's HBM capacity as the datasheet names it (80 for an H100: GiB), from the run's catalog values."""
    values = (getattr(run, "input_snapshot", None) or {}).get("catalog_values") or {}
    item = values.get(gpu or "") if isinstance(values, Mapping) else None
    specs = item.get("specs") if isinstance(item, Mapping) else None
    return _num(specs.get("hbm_gb")) if isinstance(specs, Mapping) else None


def run_gpu(run: Any) -> str:
    perf = performance_of(getattr(run, "result", None))
    if isinstance(perf.get("gpu"), str) and perf["gpu"]:
        return str(perf["gpu"])
    doc = (getattr(run, "input_snapshot", None) or {}).get("document") or {}
    cluster = doc.get("cluster") if isinstance(doc, Mapping) else None
    return str(cluster.get("gpu") or "") if isinstance(cluster, Mapping) else ""


def fit_problem(run: Any) -> dict[str, Any] | None:
    """The does-not-fit warning of a run (None when it fits or nothing is known yet).

    Two shapes: a result with ``fits: false`` (figures may be null), or a run the engine refused for memory.
    """
    gpu = run_gpu(run)
    result = getattr(run, "result", None)
    if result_fits(result) is False:
        perf = performance_of(result)
        need, usable = _num(perf.get("memory_gb_per_gpu")), _num(perf.get("memory_limit_gb"))
        hbm = hbm_gb(run, gpu)
        if need is not None and usable is not None:
            detail = (f"the best layout needs {need:,.1f} GB per GPU; {gpu or 'the GPU'} has "
                      f"{usable:,.1f} GB usable" + (f" ({hbm:,.0f} GiB HBM)" if hbm else "") + ".")
        else:
            detail = f"no layout of this workload fits in {gpu or 'the GPU'}'s memory."
        return {"need_gb": need, "usable_gb": usable, "hbm_gb": hbm, "gpu": gpu, "detail": detail,
                "source": "result"}
    if getattr(run, "status", "") == "failed":
        text = f"{getattr(run, 'error_field', '')} {getattr(run, 'error', '')}".lower()
        if any(w in text for w in NOT_FIT_WORDS) or str(getattr(run, "error_field", "")).startswith("memory"):
            return {"need_gb": None, "usable_gb": None, "hbm_gb": hbm_gb(run, gpu), "gpu": gpu,
                    "detail": str(getattr(run, "error", "")), "source": "error"}
    return None


LAYOUT_KEYS = (("tp", "TP"), ("pp", "PP"), ("dp", "DP"), ("cp", "CP"), ("ep", "EP"), ("vpp", "VPP"))


def layout_text(par: Mapping[str, Any] | None) -> str:
    """``TP2 · PP16 · DP8 · CP8 · VPP4`` (degrees of 1 left out, DP always shown)."""
    if not isinstance(par, Mapping):
        return ""
    parts = [f"{label}{par[key]}" for key, label in LAYOUT_KEYS
             if isinstance(par.get(key), int) and (par[key] > 1 or key == "dp")]
    return " · ".join(parts)


def layout_details(par: Mapping[str, Any] | None) -> str:
    if not isinstance(par, Mapping):
        return ""
    bits = []
    if par.get("micro_batch") is not None:
        bits.append(f"micro-batch {par['micro_batch']}")
    if par.get("recompute"):
        bits.append(f"recompute {par['recompute']}")
    if par.get("zero") is not None:
        bits.append(f"ZeRO-{par['zero']}")
    if par.get("sequence_parallel"):
        bits.append("sequence parallel")
    return ", ".join(bits)


def _memory(entry: Mapping[str, Any], hbm: float | None) -> dict[str, Any]:
    """Memory per GPU (decimal GB, as the engine reports it) against the usable memory and the HBM."""
    need, usable = _num(entry.get("memory_gb_per_gpu")), _num(entry.get("memory_limit_gb"))
    hbm_decimal = hbm * GIB_IN_GB if hbm else None
    cap = hbm_decimal or usable
    share = min(100.0, 100.0 * need / cap) if need is not None and cap else None
    usable_share = min(100.0, 100.0 * usable / cap) if usable is not None and cap else None
    return {"need_gb": need, "usable_gb": usable, "hbm_gb": hbm, "hbm_decimal_gb": hbm_decimal,
            "share": share, "usable_share": usable_share,
            "fits": entry.get("fits") if isinstance(entry.get("fits"), bool) else None}


def layout_panel(run: Any) -> dict[str, Any] | None:
    """The chosen layout, its memory per GPU against HBM, and (search runs) the alternatives and why they lose."""
    perf = performance_of(getattr(run, "result", None))
    par = perf.get("parallelism")
    if not isinstance(par, Mapping) or not par:
        return None
    hbm = hbm_gb(run, run_gpu(run))
    alternatives = []
    for alt in perf.get("alternatives") or []:
        if not isinstance(alt, Mapping):
            continue
        alternatives.append({"layout": layout_text(alt.get("parallelism")),
                             "details": layout_details(alt.get("parallelism")),
                             "step_time_s": _num(alt.get("step_time_s")), "mfu": _num(alt.get("mfu")),
                             "why": str(alt.get("why_it_loses") or ""), "memory": _memory(alt, hbm)})
    return {
        "layout": layout_text(par), "details": layout_details(par), "memory": _memory(perf, hbm),
        "step_time_s": _num(perf.get("step_time_s")), "mfu": _num(perf.get("mfu")),
        "gpu": run_gpu(run), "alternatives": alternatives,
        "evaluated": _num(perf.get("candidates_evaluated")), "feasible": _num(perf.get("candidates_feasible")),
        "searched": "candidates_evaluated" in perf,
    }


def uncertainty_note(result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """How the P10/P50/P90 band was made: which inputs were drawn, or plainly that there were none."""
    if not isinstance(result, Mapping) or not isinstance(result.get("monte_carlo"), Mapping):
        return None
    mc = result["monte_carlo"]
    inputs = [str(i) for i in mc.get("inputs") or []]
    band = mc.get("run_cost_usd") if isinstance(mc.get("run_cost_usd"), Mapping) else {}
    p10, p90 = _num(band.get("p10")), _num(band.get("p90"))
    flat = p10 is not None and p90 is not None and abs(p90 - p10) <= 1e-9 * max(1.0, abs(p90))
    sources = mc.get("sources") if isinstance(mc.get("sources"), Mapping) else {}
    named = {str(k): str(v) for k, v in sources.items()}
    return {"inputs": inputs, "labels": [registry.input_label(i) for i in inputs], "samples": mc.get("samples"),
            "none": not inputs or flat, "sources": named,
            "defaults": sum(1 for v in named.values() if v == "catalog default range")}


def _dig(node: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool | str):
        return float(a) == float(b)
    return bool(a == b)


def own_configuration_run(runs: list[Any], base_document: Mapping[str, Any] | None) -> Any:
    """Among sweep runs, the one whose swept values are the scenario's own configuration (the natural
    baseline: "what changes if I move from what I have"), else None."""
    if not base_document:
        return None
    for run in runs:
        overrides = (getattr(run, "input_snapshot", None) or {}).get("overrides") or {}
        if overrides and all(_same(_dig(base_document, path), value) for path, value in overrides.items()):
            return run
    return None


TIER_ROWS = (("leaf", "node_leaf", "Leaf"), ("spine", "leaf_spine", "Spine"), ("core", "spine_core", "Core"))


def _section(node: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = node.get(key)
    return value if isinstance(value, Mapping) else {}


def fabric_panel(run: Any) -> dict[str, Any] | None:
    """The cluster fabric the result assumed (the sized topology both performance and cost read): switch and
    NIC models, switches, links and oversubscription per tier, routing and where its share came from."""
    perf = performance_of(getattr(run, "result", None))
    fabric = perf.get("fabric")
    if not isinstance(fabric, Mapping) or not fabric:
        return None
    tiers = int(_num(fabric.get("tiers")) or 0)
    switches = _section(fabric, "switches")
    links = _section(fabric, "links")
    oversub = _section(fabric, "oversubscription")
    rows = [{"tier": label, "switches": _num(switches.get(key)), "links": _num(links.get(link)),
             "oversubscription": _num(oversub.get(key))}
            for i, (key, link, label) in enumerate(TIER_ROWS) if i < tiers]
    source = _section(perf, "routing_source")
    if source.get("kind") == "study":
        study = _section(source, "study")
        origin = f"pinned fabric study{' #' + str(study['run']) if study.get('run') else ''}"
    else:
        origin = "shipped flow-simulation tables"
    routing = str(fabric.get("routing") or "")
    return {
        "summary": " · ".join(str(x) for x in (
            f"{tiers}-tier {fabric.get('topology') or ''}".strip(),
            Fabric.label(fabric.get("fabric")),
            f"{Routing.label(routing)}, shares from the {origin}",
        ) if x),
        "switch": fabric.get("switch_model"), "radix": _num(fabric.get("radix")),
        "link_gbps": _num(fabric.get("link_gbps")), "nic": fabric.get("nic_model"),
        "rows": rows, "total_switches": _num(switches.get("total")),
        "nvlink_domain": _num(fabric.get("nvlink_domain_gpus")), "leaf_gpus": _num(fabric.get("leaf_gpus")),
        "pod_gpus": _num(fabric.get("pod_gpus")), "max_gpus": _num(fabric.get("max_gpus")),
        "planes": _num(fabric.get("planes")), "rails": _num(fabric.get("rails")),
        "in_network_reduction": bool(fabric.get("in_network_reduction")),
        "note": str(source.get("note") or ""),
    }
