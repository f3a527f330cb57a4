"""Engine benchmark: single prediction latency, auto search at 16k GPUs, raw vectorised evaluation rate.

Run: ``python benchmarks/bench_engine.py``. Prints figures; targets: predict < 2 ms, 405B search on
16,384 H100 < 1 s, raw evaluation >= 1e6 layouts/s on one core.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from engine.document.parse import parse_scenario
from engine.performance.api import candidate_layouts, predict, search
from engine.performance.context import Layouts, make_context
from engine.performance.hardware import gpu_spec
from engine.performance.model import evaluate

LLAMA_405B = {
    "name": "Llama-3-405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
    "ffn_hidden": 53248, "gated_ffn": True, "vocab": 128256, "seq_len": 8192,
}


def scenario(parallelism: object, gpus: int) -> dict[str, object]:
    return {
        "model": LLAMA_405B,
        "training": {"global_batch": 2048, "micro_batch": 1, "precision": "bf16", "recompute": "none",
                     "tokens": 15.6e12, "zero": 1},
        "parallelism": parallelism,
        "cluster": {"gpu": "H100-SXM", "gpus": gpus, "fabric": "infiniband", "topology": "rail-optimized"},
    }


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    fixed = scenario({"tp": 8, "pp": 16, "cp": 1, "ep": 1, "vpp": 4, "sequence_parallel": True}, 8192)
    predict(fixed)  # warm-up (catalog load, imports)
    lat = []
    for _ in range(300):
        t0 = time.perf_counter()
        predict(fixed)
        lat.append(time.perf_counter() - t0)
    print(f"predict (one layout): median {statistics.median(lat) * 1e3:.3f} ms, p95 {pct(lat, 95) * 1e3:.3f} ms "
          f"over {len(lat)} runs (target < 2 ms)")

    auto = scenario("auto", 16384)
    auto["training"] = dict(auto["training"], micro_batch="auto", recompute="auto", zero="auto")  # type: ignore[arg-type]
    times = []
    res = search(auto, top_k=5)
    for _ in range(5):
        t0 = time.perf_counter()
        res = search(auto, top_k=5)
        times.append(time.perf_counter() - t0)
    p = res.parallelism
    print(f"auto search, 405B on 16,384 H100: median {statistics.median(times):.3f} s (target < 1 s); "
          f"candidates_evaluated {res.candidates_evaluated}, candidates_feasible {res.candidates_feasible}; "
          f"best tp{p['tp']} pp{p['pp']} dp{p['dp']} cp{p['cp']} vpp{p['vpp']} mb{p['micro_batch']} "
          f"{p['recompute']} zero{p['zero']}: step {res.step_time_s:.2f} s, MFU {res.mfu:.3f}")

    s = parse_scenario(auto)
    ctx = make_context(s, gpu_spec(s.cluster.gpu))
    base = candidate_layouts(s)
    reps = max(1, 1_000_000 // len(base))
    lay = Layouts(*(np.tile(getattr(base, f), reps) for f in base.__dataclass_fields__))
    evaluate(ctx, lay)
    t0 = time.perf_counter()
    runs = 3
    for _ in range(runs):
        evaluate(ctx, lay)
    dt = (time.perf_counter() - t0) / runs
    print(f"raw vectorised evaluation: {len(lay) / dt:,.0f} layouts/s ({len(lay):,} layouts in {dt:.3f} s; "
          f"target >= 1e6/s on one core)")


if __name__ == "__main__":
    main()
