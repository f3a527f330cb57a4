"""A fabric study pinned to a scenario (issue #13): the document's ``fabric_study`` section.

By default the performance model takes the share of line rate that traffic crossing a switch tier gets from the
shipped simulated tables (``engine/fabric/data/fabric_tables.json``, :mod:`.fabric_tables`), which describe
the default catalog's fabrics at standard sizes. A team that has simulated its own cluster (a fabric-study run,
:func:`engine.flowsim.study`) may pin a scenario to that study. The study travels *in the document*,
like a calibration profile (``calibration``): a compact, top-level ``fabric_study`` section that the one parser
checks (:func:`check_fabric_study`, every number against :mod:`.bounds`), keeps in ``ScenarioSpec.extras`` and writes
back in the canonical document, so it is part of a run's input hash and of its snapshot::

    "fabric_study": {
      "run": 412, "name": "Fabric study #412: 2,048-GPU ring all-reduce",
      "fabric": "roce", "topology": "fat-tree", "gpus": 2048, "oversubscription": 1.0,
      "traffic": ["ring-allreduce"], "placement": "fragmented", "ranks": 1024, "seeds": 20,
      "shares": [{"label": "single-QP ECMP", "routing": "ecmp", "qps": 1, "p10": 0.21, "p50": 0.25, "p90": 0.3},
                 {"label": "adaptive", "routing": "adaptive", "qps": 1, "p10": 1.0, "p50": 1.0, "p90": 1.0}]
    }

:func:`compact_study` builds the section from a study result. :func:`routing_source` picks the variant for the
scenario's routing (same routing mode, the nearest queue-pair count) and says what the model uses.

How the share is used (``routing.crossing_share(..., pinned=share)``): a study's efficiency is the ideal over the
achieved completion time of the collective phase with the switch fabric as the only difference (the ideal keeps
the same NICs and NVLink ports on a non-blocking crossbar), i.e. the share of line rate the job's network traffic
gets once routing, placement and oversubscription have taken their toll. A ring moves at the pace of its slowest
hop, so any group whose ring crosses a switch tier runs its inter-node traffic at that share; the only physical
ceiling kept is the tier's capacity at the offered load (``share <= 1 / load``), which an all-to-all on an
oversubscribed leaf may hit even where the study's ring did not. Without a variant for the scenario's routing, or
when the study simulated a different fabric kind (InfiniBand vs RoCE), the shipped tables are used and the result
says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import ScenarioError
from engine.schema.bounds import BOUNDS, check_int, check_number
from engine.schema.enums import Fabric, Routing

SECTION = "fabric_study"
KEYS = {"run", "name", "fabric", "topology", "gpus", "oversubscription", "traffic", "placement", "ranks", "seeds",
        "shares"}
SHARE_KEYS = {"label", "routing", "qps", "p10", "p50", "p90"}
MAX_SHARES = 8  # a study has at most 8 variants (flowsim.study.MAX_VARIANTS)
MAX_TRAFFIC = 4
SHIPPED = "shipped fabric tables (engine/fabric/data/fabric_tables.json)"


def _bound(key: str) -> tuple[float, float, bool]:
    b = BOUNDS[f"{SECTION}.{key}"]
    return b.lo, b.hi, b.lo_open


def _num(value: Any, key: str, field: str) -> float:
    lo, hi, lo_open = _bound(key)
    return check_number(value, field, lo, hi, lo_open=lo_open)


def _int(value: Any, key: str, field: str) -> int:
    lo, hi, _ = _bound(key)
    return check_int(value, field, lo, hi)


def _text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise ScenarioError(field, f"must be a string of at most {limit} characters")
    return value


def _choice(value: Any, field: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ScenarioError(field, f"must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _share(item: Any, i: int) -> dict[str, Any]:
    path = f"{SECTION}.shares.{i}"
    if not isinstance(item, Mapping):
        raise ScenarioError(path, "must be an object {routing, qps, p10, p50, p90}")
    for key in item:
        if key not in SHARE_KEYS:
            raise ScenarioError(f"{path}.{key}", f"unknown key; allowed: {', '.join(sorted(SHARE_KEYS))}")
    for key in ("routing", "p50"):
        if key not in item:
            raise ScenarioError(f"{path}.{key}", "is required")
    out: dict[str, Any] = {"routing": _choice(item["routing"], f"{path}.routing", Routing.values()),
                           "qps": _int(item.get("qps", 1), "qps", f"{path}.qps")}
    if item.get("label") is not None:
        out["label"] = _text(item["label"], f"{path}.label", 60)
    for key in ("p10", "p50", "p90"):
        if item.get(key) is not None:
            out[key] = _num(item[key], "efficiency", f"{path}.{key}")
    if "p10" in out and "p90" in out and not out["p10"] <= out["p50"] <= out["p90"]:
        raise ScenarioError(f"{path}.p50", "must lie between p10 and p90")
    return out


def check_fabric_study(section: Any) -> dict[str, Any]:
    """The document's ``fabric_study`` section, validated and normalised (ScenarioError naming the field)."""
    if not isinstance(section, Mapping):
        raise ScenarioError(SECTION, "must be an object (a pinned fabric study)")
    for key in section:
        if key not in KEYS:
            raise ScenarioError(f"{SECTION}.{key}", f"unknown key; allowed: {', '.join(sorted(KEYS))}")
    for key in ("fabric", "shares"):
        if key not in section:
            raise ScenarioError(f"{SECTION}.{key}", "is required")
    out: dict[str, Any] = {"fabric": _choice(section["fabric"], f"{SECTION}.fabric", Fabric.values())}
    if section.get("run") is not None:
        out["run"] = _int(section["run"], "run", f"{SECTION}.run")
    if section.get("name") is not None:
        out["name"] = _text(section["name"], f"{SECTION}.name", 200)
    if section.get("topology") is not None:
        out["topology"] = _text(section["topology"], f"{SECTION}.topology", 40)
    if section.get("placement") is not None:
        out["placement"] = _text(section["placement"], f"{SECTION}.placement", 40)
    for key in ("gpus", "ranks", "seeds"):
        if section.get(key) is not None:
            out[key] = _int(section[key], key, f"{SECTION}.{key}")
    if section.get("oversubscription") is not None:
        out["oversubscription"] = _num(section["oversubscription"], "oversubscription", f"{SECTION}.oversubscription")
    if section.get("traffic") is not None:
        traffic = section["traffic"]
        if isinstance(traffic, str):
            traffic = [traffic]
        if not isinstance(traffic, list) or not 1 <= len(traffic) <= MAX_TRAFFIC:
            raise ScenarioError(f"{SECTION}.traffic", f"must be a list of 1 to {MAX_TRAFFIC} traffic kinds")
        out["traffic"] = [_text(t, f"{SECTION}.traffic.{i}", 40) for i, t in enumerate(traffic)]
    shares = section["shares"]
    if not isinstance(shares, list) or not 1 <= len(shares) <= MAX_SHARES:
        raise ScenarioError(f"{SECTION}.shares", f"must be a list of 1 to {MAX_SHARES} routing variants")
    out["shares"] = [_share(item, i) for i, item in enumerate(shares)]
    return out


def compact_study(result: Mapping[str, Any], *, run: int | None = None, name: str = "") -> dict[str, Any]:
    """The ``fabric_study`` section for a :func:`engine.flowsim.study` result (validated)."""
    table = result.get("table") or []
    variants = result.get("variants") or []
    if not table or not variants:
        raise ScenarioError(SECTION, "the study has no results to pin")
    first = variants[0].get("result") or {}
    inputs = first.get("inputs") or {}
    fabric = result.get("fabric") or inputs.get("fabric") or {}
    section: dict[str, Any] = {
        "fabric": fabric.get("fabric"),
        "topology": fabric.get("topology"),
        "gpus": fabric.get("gpus"),
        "oversubscription": _leaf_oversubscription(fabric),
        "traffic": list(result.get("traffic") or inputs.get("traffic") or [])[:MAX_TRAFFIC] or None,
        "placement": inputs.get("placement"),
        "ranks": result.get("ranks"),
        "seeds": inputs.get("seeds"),
        "shares": [{k: row[k] for k in ("label", "routing", "qps", "p10", "p50", "p90") if row.get(k) is not None}
                   for row in table[:MAX_SHARES]],
    }
    if run is not None:
        section["run"] = run
    if name:
        section["name"] = name[:200]
    return check_fabric_study({k: v for k, v in section.items() if v is not None})


def _leaf_oversubscription(fabric: Mapping[str, Any]) -> float | None:
    over = fabric.get("oversubscription")
    if isinstance(over, Mapping):
        values = [float(v) for v in over.values() if isinstance(v, int | float)]
        return max(values) if values else None
    return float(over) if isinstance(over, int | float) else None


def describe(section: Mapping[str, Any]) -> str:
    """'fabric study run #412 (Fabric study #412: ...)' — how results and pages name a pinned study."""
    head = f"fabric study run #{section['run']}" if section.get("run") is not None else "pinned fabric study"
    return f"{head} ({section['name']})" if section.get("name") else head


def routing_source(section: Mapping[str, Any] | None, *, routing: str, qps: float,
                   fabric: str) -> dict[str, Any]:
    """What the performance model uses for ``routing`` (with ``qps`` queue pairs) on a ``fabric`` cluster.

    ``{"kind": "study", "share": p50, "variant": {...}, "study": {...}, "note": "..."}`` when the pinned study
    has a variant for the routing mode, else ``{"kind": "shipped", "table": ..., "note": reason or ""}``.
    """
    if not section:
        return {"kind": "shipped", "table": SHIPPED, "note": ""}
    name = describe(section)
    study = {k: section[k] for k in ("run", "name", "fabric", "topology", "gpus", "oversubscription", "traffic",
                                     "placement", "ranks") if k in section}
    if section.get("fabric") != fabric:
        return {"kind": "shipped", "table": SHIPPED, "study": study,
                "note": f"{name} simulated a {section.get('fabric')} fabric, this cluster is {fabric}: "
                        "routing shares from the shipped tables"}
    rows = [r for r in section.get("shares", []) if r.get("routing") == routing]
    if not rows:
        have = ", ".join(sorted({str(r.get("routing")) for r in section.get("shares", [])}))
        return {"kind": "shipped", "table": SHIPPED, "study": study,
                "note": f"{name} has no {routing} variant (it has {have}): routing shares from the shipped tables"}
    want = max(float(qps), 1.0)
    row = min(rows, key=lambda r: abs(math.log2(float(r.get("qps", 1))) - math.log2(want)))
    share = float(row["p50"])
    label = row.get("label") or routing
    qps_note = "" if float(row.get("qps", 1)) == want else f" (its nearest variant: {row.get('qps', 1)} QPs vs {want:g})"
    return {"kind": "study", "share": share, "variant": dict(row), "study": study,
            "note": f"routing share from {name}: {label} delivers {100.0 * share:.0f}% of line rate{qps_note}"}
