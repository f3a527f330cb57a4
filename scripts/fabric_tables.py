"""Regenerate engine/fabric/data/fabric_tables.json with the flow simulator (``make fabric-tables``).

Two tables (see engine/flowsim/tables.py for what reads them):

* ``crossing``: share of line rate of traffic crossing a leaf's uplinks by routing, offered load per uplink and
  hashed flows per NIC, on a 64-leaf, 32-down 2-tier leaf/spine (one NIC per node, ideal NICs);
* ``studies``: simulate() efficiency of the default catalog's topologies (InfiniBand QM9700, RoCE SN5600 at
  400G; fat-tree, rail-optimized, multi-plane; 1:1 and 2:1) at standard sizes, one ring all-reduce phase over
  the whole cluster (packed) and over half of it on a fragmented, busy fleet.

Every parameter is written into the file. ``--quick`` runs a small grid (for tests and smoke checks).
Usage: python scripts/fabric_tables.py [--quick] [--seeds N] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.errors import ScenarioError
from engine.fabric.tables import TABLE_PATH
from engine.flowsim.simulate import FLOWSIM_VERSION, simulate
from engine.flowsim.tables import RATE_TOL, crossing_experiment

MODEL = {"name": "Llama-2-7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
         "vocab": 32000, "seq_len": 4096}

FULL = {
    "crossing": {"patterns": ["aligned", "scattered"], "routings": ["ecmp", "pinned", "adaptive"], "loads": [0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0],
                 "flows_per_nic": [1, 2, 4, 8, 16], "seeds": 6, "leaves": 64, "down": 32},
    "studies": {"fabrics": ["infiniband", "roce"], "topologies": ["fat-tree", "rail-optimized", "multi-plane"],
                "gpus": [1024, 4096, 16384], "oversubscription": [1.0, 2.0],
                "routings": ["ecmp", "ecmp-qp", "adaptive", "pinned"], "traffic": ["ring-allreduce"],
                "placements": [{"placement": "packed", "ranks": "all"},
                               {"placement": "fragmented", "ranks": "half", "fragmentation": 0.4, "background": 0.5}],
                "gpu": "H100-SXM", "nic_gbps": 400, "seeds": 10},
}
QUICK = {
    "crossing": {"patterns": ["aligned"], "routings": ["ecmp", "adaptive"], "loads": [0.5, 1.0], "flows_per_nic": [1, 4], "seeds": 2,
                 "leaves": 16, "down": 16},
    "studies": {"fabrics": ["roce"], "topologies": ["fat-tree"], "gpus": [256, 1024], "oversubscription": [1.0],
                "routings": ["ecmp", "adaptive"], "traffic": ["ring-allreduce"],
                "placements": [{"placement": "packed", "ranks": "all"}], "gpu": "H100-SXM", "nic_gbps": 400,
                "seeds": 2},
}


def progress(i: int, n: int, what: str, t0: float) -> None:
    done = int(30 * i / max(n, 1))
    print(f"\r[{'#' * done}{'.' * (30 - done)}] {i}/{n} {time.perf_counter() - t0:6.1f} s {what[:60]:<60}",
          end="", file=sys.stderr, flush=True)


def crossing_table(p: dict[str, Any]) -> dict[str, Any]:
    patterns: dict[str, Any] = {}
    n = len(p["patterns"]) * len(p["routings"]) * len(p["loads"]) * len(p["flows_per_nic"])
    i, t0 = 0, time.perf_counter()
    for pattern in p["patterns"]:
        grid: dict[str, Any] = {}
        for routing in p["routings"]:
            mean, comp = [], []
            for load in p["loads"]:
                row_m, row_c = [], []
                for flows in p["flows_per_nic"]:
                    progress(i, n, f"crossing {pattern} {routing} load {load} flows {flows}", t0)
                    r = crossing_experiment(routing, load, flows, seeds=p["seeds"], leaves=p["leaves"],
                                            down=p["down"], pattern=pattern)
                    row_m.append(round(r["mean"], 4))
                    row_c.append(round(r["completion"], 4))
                    i += 1
                mean.append(row_m)
                comp.append(row_c)
            grid[routing] = {"loads": p["loads"], "flows_per_nic": p["flows_per_nic"], "mean": mean,
                             "completion": comp}
        patterns[pattern] = grid
    progress(n, n, "crossing done", t0)
    print(file=sys.stderr)
    return {"experiment": "crossing_experiment (engine/flowsim/tables.py)", "parameters": p,
            "patterns": patterns}


def doc(p: dict[str, Any], fabric: str, topology: str, gpus: int, over: float) -> dict[str, Any]:
    return {"model": MODEL, "training": {"global_batch": gpus, "micro_batch": 1, "tokens": 1e12},
            "parallelism": {"tp": 8, "pp": 1},
            "cluster": {"gpu": p["gpu"], "gpus": gpus, "nic_gbps": p["nic_gbps"], "fabric": fabric,
                        "topology": topology, "oversubscription": over}}


def studies_table(p: dict[str, Any]) -> dict[str, Any]:
    combos = [(f, t, g, o, r, tr, pl) for f in p["fabrics"] for t in p["topologies"] for g in p["gpus"]
              for o in p["oversubscription"] for r in p["routings"] for tr in p["traffic"] for pl in p["placements"]]
    rows = []
    t0 = time.perf_counter()
    for i, (fabric, topology, gpus, over, routing, traffic, pl) in enumerate(combos):
        progress(i, len(combos), f"{fabric} {topology} {gpus} {over:g}:1 {routing} {traffic} {pl['placement']}", t0)
        row: dict[str, Any] = {"fabric": fabric, "topology": topology, "gpus": gpus, "oversubscription": over,
                               "routing": routing, "traffic": traffic, "placement": pl["placement"]}
        ranks = gpus if pl["ranks"] == "all" else gpus // 2
        kwargs = {k: v for k, v in pl.items() if k in ("fragmentation", "background")}
        try:
            out = simulate(doc(p, fabric, topology, gpus, over), traffic, ranks=ranks, routing=routing,
                           placement=pl["placement"], seeds=p["seeds"], **kwargs)
        except ScenarioError as exc:
            row["error"] = str(exc)
        else:
            row.update({
                "ranks": ranks, "qps": out["inputs"]["qps"], "tiers": out["inputs"]["fabric"]["tiers"],
                "efficiency": {k: round(out["efficiency"][k], 4) for k in ("p10", "p50", "p90", "mean")},
                "flow_mean": round(out["flow_throughput"]["mean"], 4),
                "bottleneck_tier": out["bottleneck_tier"],
            })
        rows.append(row)
    progress(len(combos), len(combos), "studies done", t0)
    print(file=sys.stderr)
    return {"parameters": p, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small grid (tests, smoke checks)")
    ap.add_argument("--seeds", type=int, default=None, help="override the seed count of both tables")
    ap.add_argument("--out", type=Path, default=TABLE_PATH)
    ap.add_argument("--skip-studies", action="store_true")
    args = ap.parse_args(argv)
    params = json.loads(json.dumps(QUICK if args.quick else FULL))
    if args.seeds is not None:
        if args.seeds < 1:
            print("--seeds: must be >= 1", file=sys.stderr)
            return 2
        params["crossing"]["seeds"] = params["studies"]["seeds"] = args.seeds
    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "about": "Simulated fabric tables (flow-level simulator, issue #13). Regenerate with `make fabric-tables` "
                 "(scripts/fabric_tables.py); the parameters below are the script's. Flow-level: no packet loss, "
                 "PFC pauses, incast queueing or congestion-control dynamics (docs/flowsim.md).",
        "generated_by": "scripts/fabric_tables.py" + (" --quick" if args.quick else ""),
        "generated_on": datetime.date.today().isoformat(),
        "engine": {"name": "flowsim", "version": FLOWSIM_VERSION, "rate_tolerance": RATE_TOL},
        "crossing": crossing_table(params["crossing"]),
    }
    if not args.skip_studies:
        out["studies"] = studies_table(params["studies"])
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out} in {out['elapsed_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
