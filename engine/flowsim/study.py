"""A fabric study: one or several :func:`simulate` variants of the same job, and a sentence a planner can quote.

``study(scenario, variants=[...])`` runs each variant (routing, QPs, placement...) on the same scenario, seeds and
traffic, and returns every result with a comparison table and a quote such as "single-QP ECMP delivers 25% of
line rate to this 2,048-GPU ring all-reduce; 8 QPs: 89%; adaptive: 100%". Pure engine: the platform's fabric
study run kind calls it with the run's options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.flowsim.estimate import SimulationEstimate, check_simulation
from engine.flowsim.simulate import estimate, simulate
from engine.schema.types import ScenarioSpec

# The comparison planners ask for first: hashed RoCE, RoCE with more queue pairs, adaptive routing.
STANDARD_VARIANTS: tuple[dict[str, Any], ...] = (
    {"label": "single-QP ECMP", "routing": "ecmp", "qps": 1},
    {"label": "8 QPs", "routing": "ecmp-qp", "qps": 8},
    {"label": "adaptive", "routing": "adaptive", "qps": 1},
)
VARIANT_KEYS = {"label", "routing", "qps", "placement", "fragmentation", "background", "channels", "rail_aligned"}
MAX_VARIANTS = 8
TRAFFIC_WORDS = {
    "ring-allreduce": "ring all-reduce", "ring-allgather": "ring all-gather", "ring-reducescatter":
    "ring reduce-scatter", "tree-allreduce": "tree all-reduce", "all-to-all": "all-to-all",
    "pp-sendrecv": "pipeline send/recv", "permutation": "node permutation", "cross-leaf": "cross-leaf permutation",
}


def _pct(x: float) -> str:
    return f"{100.0 * x:.0f}%"


def quote(ranks: int, traffic: str, rows: Sequence[tuple[str, float]]) -> str:
    """'<first> delivers X% of line rate to this N-GPU <traffic>; <second>: Y%; ...' (P50 efficiencies)."""
    if not rows:
        return ""
    kind = traffic.split(":")[0]
    what = TRAFFIC_WORDS.get(kind, kind)
    head = f"{rows[0][0]} delivers {_pct(rows[0][1])} of line rate to this {ranks:,}-GPU {what}"
    return "; ".join([head, *(f"{label}: {_pct(eff)}" for label, eff in rows[1:])])


def _clean_variants(variants: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    items = list(STANDARD_VARIANTS if variants is None else variants)
    if not items:
        raise ScenarioError("variants", "give at least one variant")
    if len(items) > MAX_VARIANTS:
        raise ScenarioError("variants", f"at most {MAX_VARIANTS} variants, got {len(items)}")
    out = []
    for i, v in enumerate(items):
        if not isinstance(v, Mapping):
            raise ScenarioError(f"variants.{i}", "must be an object")
        unknown = set(v) - VARIANT_KEYS
        if unknown:
            raise ScenarioError(f"variants.{i}.{sorted(unknown)[0]}", f"unknown key; allowed: {', '.join(sorted(VARIANT_KEYS))}")
        label = v.get("label") or f"{v.get('routing', 'scenario routing')}" + (f" {v['qps']} QPs" if v.get("qps") else "")
        if not isinstance(label, str) or len(label) > 60:
            raise ScenarioError(f"variants.{i}.label", "must be a string of at most 60 characters")
        out.append({**v, "label": label})
    return out


def estimate_study(scenario: Mapping[str, Any] | ScenarioSpec, traffic: str | Sequence[str] = "ring-allreduce",
                   ranks: int | None = None, placement: str = "packed", seeds: int = 20,
                   variants: Sequence[Mapping[str, Any]] | None = None,
                   **options: Any) -> list[tuple[str, SimulationEstimate]]:
    """``(label, estimate)`` of every variant :func:`study` would run with the same arguments, without running it.

    Raises whatever :func:`study` would raise for bad input (the same parser and checks), so a caller that
    estimates first learns of every problem a run of the study would meet before it starts.
    """
    s = parse_scenario(scenario, options.get("catalog"))
    out = []
    for v in _clean_variants(variants):
        kw = {**options, "placement": placement, **{k: val for k, val in v.items() if k != "label"}}
        out.append((str(v["label"]), estimate(s, traffic, ranks=ranks, seeds=seeds, **kw)))
    return out


def study(scenario: Mapping[str, Any] | ScenarioSpec, traffic: str | Sequence[str] = "ring-allreduce",
          ranks: int | None = None, placement: str = "packed", seeds: int = 20,
          variants: Sequence[Mapping[str, Any]] | None = None,
          progress: Callable[[int, int], None] | None = None, **options: Any) -> dict[str, Any]:
    """Run every variant (default :data:`STANDARD_VARIANTS`) and compare them.

    ``options`` are passed to :func:`simulate` for every variant (``group``, ``channels``, ``fragmentation``,
    ``background``, ``seed``, ``catalog``); a variant's own keys override them. ``progress(done, total)``
    counts seeds over all variants.
    """
    s = parse_scenario(scenario, options.get("catalog"))
    items = _clean_variants(variants)
    for _label, cost in estimate_study(s, traffic, ranks, placement, seeds, items, **options):
        check_simulation(cost)  # every variant within the engine's ceilings before the first one runs
    total = seeds * len(items)
    results = []
    for i, v in enumerate(items):
        kw = {**options, "placement": placement, **{k: val for k, val in v.items() if k != "label"}}

        def step(done: int, _total: int, base: int = i * seeds) -> None:
            if progress is not None:
                progress(base + done, total)

        out = simulate(s, traffic, ranks=ranks, seeds=seeds, progress=step, **kw)
        results.append({"label": v["label"], "result": out})
    first = results[0]["result"]
    n_ranks = int(first["inputs"]["ranks"])
    traffic_name = first["inputs"]["traffic"][0]
    table = [
        {"label": r["label"], "routing": r["result"]["inputs"]["routing"], "qps": r["result"]["inputs"]["qps"],
         "placement": r["result"]["inputs"]["placement"], **{k: r["result"]["efficiency"][k] for k in ("p10", "p50", "p90")},
         "flow_mean": r["result"]["flow_throughput"]["mean"], "bottleneck_tier": r["result"]["bottleneck_tier"]}
        for r in results
    ]
    return {
        "kind": "fabric-study",
        "ranks": n_ranks,
        "traffic": first["inputs"]["traffic"],
        "table": table,
        "quote": quote(n_ranks, traffic_name, [(row["label"], row["p50"]) for row in table]),
        "variants": results,
        "fabric": first["inputs"]["fabric"],
        "elapsed_s": sum(r["result"]["elapsed_s"] for r in results),
        # headline figures of the first variant, so reports and sweeps read a study like one simulation
        "efficiency": first["efficiency"],
        "bottleneck_tier": first["bottleneck_tier"],
        "tier_utilization": first["tier_utilization"],
    }
