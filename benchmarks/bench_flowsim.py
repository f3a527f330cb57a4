"""Flow simulator benchmark (issue #13): scale, speed and memory on one core.

Run: ``python benchmarks/bench_flowsim.py``. Prints flows, links and seconds. Targets: a 16,384-GPU 3-tier
fat-tree, one ring all-reduce phase with 8 channels under ECMP, 20 seeds: < 30 s on one core and < 2 GB;
a 2,048-GPU study (the four routing modes, 20 seeds each): < 2 s.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.flowsim.simulate import simulate

MODEL = {"name": "Llama-2-7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "gated_ffn": True,
         "vocab": 32000, "seq_len": 4096}


def doc(gpus: int, **cluster: object) -> dict[str, object]:
    return {"model": MODEL, "training": {"global_batch": gpus, "micro_batch": 1, "tokens": 1e12},
            "parallelism": {"tp": 8, "pp": 1}, "cluster": {"gpu": "H100-SXM", "gpus": gpus, **cluster}}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def line(label: str, out: dict[str, object], seconds: float) -> None:
    eff = out["efficiency"]
    assert isinstance(eff, dict)
    print(f"{label}: {seconds:.2f} s; flows {out['flows']:,} per seed, links {out['links']:,}; "
          f"efficiency p10/p50/p90 {eff['p10']:.3f}/{eff['p50']:.3f}/{eff['p90']:.3f}; "
          f"bottleneck {out['bottleneck_tier']}", flush=True)


def main() -> None:
    simulate(doc(64), seeds=1)  # warm-up: imports, catalog
    base_rss = peak_rss_mb()

    big = doc(16384)
    t0 = time.perf_counter()
    out = simulate(big, "ring-allreduce", routing="ecmp", qps=1, channels=8, seeds=20)
    t = time.perf_counter() - t0
    fab = out["inputs"]["fabric"]  # type: ignore[index]
    print(f"fabric: {fab['gpus']:,} GPUs, {fab['tiers']}-tier {fab['topology']} of {fab['radix']}-port switches, "
          f"{fab['leaves']} leaves / {fab['spines']} spines / {fab['cores']} cores")
    line("16,384 GPUs, ring all-reduce, 8 channels, ECMP 1 QP, 20 seeds (target < 30 s)", out, t)
    print(f"peak memory: {peak_rss_mb():.0f} MB RSS (process, {base_rss:.0f} MB before) (target < 2,048 MB)")

    for label, kwargs in (
        ("16,384 GPUs, ring all-reduce, 8 channels, ECMP 8 QPs, 20 seeds", {"routing": "ecmp", "qps": 8}),
        ("16,384 GPUs, ring all-reduce, adaptive, 20 seeds", {"routing": "adaptive"}),
        ("16,384 GPUs, node permutation, ECMP, 20 seeds", {"routing": "ecmp", "traffic": "permutation"}),
    ):
        t0 = time.perf_counter()
        out = simulate(big, **{"traffic": "ring-allreduce", "seeds": 20, **kwargs})  # type: ignore[arg-type]
        line(label, out, time.perf_counter() - t0)

    small = doc(2048, fabric="roce")
    t0 = time.perf_counter()
    figures = {}
    flows = links = 0
    for routing in ("ecmp", "ecmp-qp", "adaptive", "pinned"):
        out = simulate(small, "ring-allreduce", routing=routing, placement="fragmented", ranks=1024, seeds=20)
        figures[routing] = out["efficiency"]["p50"]  # type: ignore[index]
        flows, links = int(out["flows"]), int(out["links"])  # type: ignore[call-overload]
    t = time.perf_counter() - t0
    print(f"2,048-GPU study (1,024-GPU job fragmented; ecmp / ecmp-qp / adaptive / pinned x 20 seeds): {t:.2f} s "
          f"(target < 2 s); flows {flows:,}, links {links:,}; p50 efficiency "
          + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()))
    print(f"peak memory at exit: {peak_rss_mb():.0f} MB RSS")


if __name__ == "__main__":
    main()
