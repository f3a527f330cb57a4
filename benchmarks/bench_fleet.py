"""Fleet simulator speed: one replication of a year on a 50,000-GPU fleet with ~10,000 jobs (target < 2 s, one core).

Prints the figures; asserts nothing about time (see benchmarks/run_all.py). Run: ``python benchmarks/bench_fleet.py``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.fleet.core import prepare, simulate_prepared

LLAMA_8B = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "gated_ffn": True,
            "vocab": 128256, "seq_len": 8192}


def plan(policy: str) -> dict[str, Any]:
    """12,288 A100 + 32,768 H100 + 5,120 B200 (50,176 GPUs); 10,000 experiments a year plus 4 named runs."""
    return {
        "horizon_days": 365,
        "policy": policy,
        "failures": True,
        "clusters": [
            {"name": "a100", "gpu": "A100-80GB", "gpus": 12288, "nic_gbps": 200, "pod_gpus": 2048},
            {"name": "h100", "gpu": "H100-SXM", "gpus": 32768, "pod_gpus": 4096, "reserved_gpus": 2048},
            {"name": "b200", "gpu": "B200", "gpus": 5120, "nic_gbps": 400},
        ],
        "jobs": [
            {"name": f"llama-8b-{i}", "team": "pretrain", "gpus": 1024, "submit_day": 30 * i,
             "deadline_day": 30 * i + 60, "priority": 10,
             "workload": {"model": LLAMA_8B, "training": {"global_batch": 1024, "tokens": 2e12}}}
            for i in range(4)
        ],
        "arrivals": [{
            "name": "experiments", "team": "research", "rate_per_day": 10000 / 365,
            "gpus": {"dist": "choice", "values": [8, 64, 256, 1024, 4096], "weights": [0.4, 0.3, 0.15, 0.1, 0.05]},
            "duration_days": {"dist": "lognormal", "mean": 3.5, "sigma": 1.0},
        }],
    }


def main() -> None:
    for policy in ("fifo", "priority", "backfill"):
        t0 = time.perf_counter()
        prep = prepare(plan(policy))
        t_prep = time.perf_counter() - t0
        times, cpu = [], []
        for seed in range(3):
            t1, c1 = time.perf_counter(), time.process_time()
            r = simulate_prepared(prep, seed)
            times.append(time.perf_counter() - t1)
            cpu.append(time.process_time() - c1)
        print(f"fleet {policy:8s}: 50,176 GPUs, {r['jobs_submitted']:,} jobs, 365 days, {r['events']:,} events, "
              f"{r['interruptions']:,} interruptions: one replication {min(times):.2f} s wall, {min(cpu):.2f} s CPU "
              f"(best of 3; target < 2 s), "
              f"prepare {t_prep:.2f} s; utilization {r['utilization']:.1%}, mean wait {r['wait_days']['mean']:.2f} d, "
              f"first shortfall day {r['first_shortfall_day']}")
    print(f"(pid {os.getpid()}, one process, one core; load average {os.getloadavg()[0]:.1f} — wall time grows "
          "with other processes on the machine, CPU time much less)")


if __name__ == "__main__":
    main()
