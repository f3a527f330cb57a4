"""Timing of the TCO engine: one tco() call, 10,000-sample Monte Carlo, tornado sensitivity.

Run: ``python benchmarks/bench_tco.py`` from the repository root. Targets: Monte Carlo of 10,000 samples < 1 s.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.cost.tco import tco

REFERENCE: dict[str, Any] = {
    "name": "Llama-3-405B-class on 16,384 H100, 8x400G IB, 3-tier fat-tree",
    "model": {"layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "ffn_hidden": 53248, "gated_ffn": True,
              "vocab": 128256, "seq_len": 8192},
    "training": {"global_batch": 2048, "tokens": 15e12},
    "parallelism": {"tp": 8, "pp": 16, "dp": 128},
    "cluster": {"gpu": "H100-SXM", "gpus": 16384, "nics_per_node": 8, "nic_gbps": 400, "fabric": "infiniband",
                "topology": "fat-tree", "tiers": 3},
    "costs": {
        "depreciation_years": 5,
        "usd_per_kwh": {"low": 0.05, "likely": 0.08, "high": 0.19},
        "pue": {"low": 1.1, "likely": 1.3, "high": 1.56},
        "prices": {"HGX-H100": {"low": 250000, "likely": 295600, "high": 320000},
                   "QM9700": {"low": 36000, "likely": 42000, "high": 50000}},
        "goodput": {"failure_rate_scale": {"low": 0.5, "likely": 1.0, "high": 2.0}},
    },
}


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    times = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    tco(REFERENCE)  # warm-up (imports, catalog)
    t_one, out = timed(lambda: tco(REFERENCE), 20)
    t_mc, mc = timed(lambda: tco(REFERENCE, monte_carlo=10_000, seed=1), 5)
    perf = copy.deepcopy(REFERENCE)
    perf["cluster"]["nic_gbps"] = {"low": 200, "likely": 400, "high": 400}
    t_mc_perf, mcp = timed(lambda: tco(perf, monte_carlo=10_000, seed=1), 3)
    t_sens, sens = timed(lambda: tco(REFERENCE, sensitivity=True), 5)
    t = out["tco"]
    print(f"tco() single call:                        {t_one * 1e3:8.1f} ms")
    print(f"Monte Carlo 10,000 samples (cost ranges): {t_mc * 1e3:8.1f} ms  (target < 1000 ms)")
    print(f"Monte Carlo 10,000 samples + NIC range:   {t_mc_perf * 1e3:8.1f} ms  "
          f"({mcp['monte_carlo']['performance_points']} predict points)")
    print(f"sensitivity ({len(sens['sensitivity'])} inputs):                 {t_sens * 1e3:8.1f} ms")
    print(f"network share of TCO {t['network_share_of_tco']:.3f}, $/GPU-h {t['usd_per_gpu_hour']:.2f}, "
          f"run cost P10/P50/P90 $M: " + " / ".join(f"{mc['monte_carlo']['run_cost_usd'][p] / 1e6:.1f}"
                                                   for p in ("p10", "p50", "p90")))


if __name__ == "__main__":
    main()
