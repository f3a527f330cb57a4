"""Validate and summarise the component-measurement data set (engine/performance/data/components/).

Three files, each ``{"sources": {...}, "rows": [...]}``, every row copied from a public source it names:

* ``nccl_tests.json``: collective bus bandwidth / time by GPU, fabric, nodes, ranks, collective, message size;
* ``gemm.json``: achieved dense GEMM TFLOP/s by GPU, precision and (batch, m, n, k);
* ``attention.json``: fused-attention TFLOP/s by GPU, implementation, precision, head dim, sequence length,
  causal mask and pass.

Checks: every row names a known source, a URL and a location inside the source; every number present is
positive (``null`` means "not stated by the source"); categorical fields take the documented values; a row
carries at least one measured quantity; ranks = nodes x GPUs per node where all three are given; an achieved
TFLOP/s does not exceed the spec peak its own source states. Prints one summary per file (counts by GPU,
collective, rank range, ...) and the scaling series the step model should reproduce. Exit status 1 when a row
fails a check.

Usage: python scripts/component_report.py [--dir PATH] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parents[1] / "engine" / "performance" / "data" / "components"

CONFIDENCE = {"high", "medium", "low"}
COLLECTIVES = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"}
INTERCONNECTS = {"nvlink", "infiniband", "roce", "efa", "unknown_rdma", "unstated"}
ALGORITHMS = {None, "ring", "tree", "nvls", "nvlstree", "pat", "collnet"}
PASSES = {"fwd", "bwd", "fwd_bwd"}
NCCL_MEASURES = ("time_us", "busbw_GBps", "algbw_GBps", "bandwidth_GBps_unlabelled")
RANK_BUCKETS = ((1, 8, "1-8"), (9, 64, "9-64"), (65, 512, "65-512"), (513, 10**9, "513+"))

Row = dict[str, Any]


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _common_checks(row: Row, sources: dict[str, Any]) -> list[str]:
    errs = []
    for key in ("source", "url", "quote_or_location", "gpu"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            errs.append(f"missing {key}")
    if row.get("source") not in sources:
        errs.append(f"unknown source {row.get('source')!r}")
    if row.get("confidence") not in CONFIDENCE:
        errs.append(f"confidence {row.get('confidence')!r} not in {sorted(CONFIDENCE)}")
    for key, v in row.items():
        if _is_number(v) and not v > 0:
            errs.append(f"{key}={v} is not positive")
        elif (
            v is not None and key.endswith(("_GBps", "_us", "_ms", "tflops", "_bytes")) and not _is_number(v)
        ):
            errs.append(f"{key}={v!r} is not a number")
    return errs


def _check_nccl(row: Row) -> list[str]:
    errs = []
    if row.get("collective") not in COLLECTIVES:
        errs.append(f"collective {row.get('collective')!r}")
    if row.get("interconnect") not in INTERCONNECTS:
        errs.append(f"interconnect {row.get('interconnect')!r}")
    if row.get("algorithm") not in ALGORITHMS:
        errs.append(f"algorithm {row.get('algorithm')!r}")
    if not any(_is_number(row.get(k)) for k in NCCL_MEASURES):
        errs.append("no measured quantity (time or bandwidth)")
    nodes, gpn, ranks = row.get("nodes"), row.get("gpus_per_node"), row.get("ranks")
    if isinstance(nodes, int) and isinstance(gpn, int) and isinstance(ranks, int) and nodes * gpn != ranks:
        errs.append(f"ranks {ranks} != nodes {nodes} x gpus_per_node {gpn}")
    if row.get("interconnect") == "nvlink" and _is_number(nodes) and nodes != 1:
        errs.append("nvlink row spans more than one node")
    for lo, hi in (("p5_GBps", "p95_GBps"),):
        if _is_number(row.get(lo)) and _is_number(row.get(hi)) and row[lo] > row[hi]:
            errs.append(f"{lo} > {hi}")
    return errs


def _check_gemm(row: Row) -> list[str]:
    errs = []
    if not isinstance(row.get("precision"), str) or not row["precision"]:
        errs.append("missing precision")
    for key in ("batch", "m", "n", "k"):
        if not isinstance(row.get(key), int) or isinstance(row.get(key), bool):
            errs.append(f"{key} is not an integer")
    if not _is_number(row.get("tflops")):
        errs.append("missing tflops")
    peak = row.get("spec_peak_tflops")
    if _is_number(peak) and _is_number(row.get("tflops")) and row["tflops"] > peak:
        errs.append(f"tflops {row['tflops']} above the source's spec peak {peak}")
    return errs


def _check_attention(row: Row) -> list[str]:
    errs = []
    if row.get("pass") not in PASSES:
        errs.append(f"pass {row.get('pass')!r}")
    if not _is_number(row.get("tflops")):
        errs.append("missing tflops")
    for key in ("implementation", "precision"):
        if not isinstance(row.get(key), str) or not row[key]:
            errs.append(f"missing {key}")
    if row.get("causal") is None and not row.get("claim"):
        errs.append("causal unknown on a row that is not a headline claim")
    if not isinstance(row.get("tflops_derived"), bool):
        errs.append("tflops_derived must be true or false")
    return errs


def validate(name: str, data: dict[str, Any], check: Callable[[Row], list[str]]) -> list[str]:
    sources = data.get("sources") or {}
    problems = [f"{name}: source {sid!r} has no url" for sid, s in sources.items() if not s.get("url")]
    ids = Counter(r.get("id") for r in data["rows"])
    problems += [f"{name}: duplicate id {i!r}" for i, c in ids.items() if c > 1 or i is None]
    for row in data["rows"]:
        for err in _common_checks(row, sources) + check(row):
            problems.append(f"{name}: {row.get('id')}: {err}")
    return problems


def _table(title: str, counter: Counter[Any], width: int = 46) -> str:
    lines = [f"  {title}"]
    for key, n in sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        label = " / ".join(str(k) for k in key) if isinstance(key, tuple) else str(key)
        lines.append(f"    {label:<{width}} {n:>5}")
    return "\n".join(lines)


def _rank_bucket(ranks: Any) -> str:
    if not _is_number(ranks):
        return "unstated"
    return next(label for lo, hi, label in RANK_BUCKETS if lo <= ranks <= hi)


def _series(rows: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    out: dict[Any, list[Row]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return out


def _bw(r: Row) -> float | None:
    for k in ("busbw_GBps", "bandwidth_GBps_unlabelled", "algbw_GBps"):
        if _is_number(r.get(k)):
            return float(r[k])
    return None


def report_nccl(data: dict[str, Any]) -> str:
    rows = data["rows"]
    out = [f"nccl_tests.json: {len(rows)} rows from {len({r['source'] for r in rows})} sources"]
    out.append(_table("by gpu", Counter(r["gpu"] for r in rows)))
    out.append(_table("by collective", Counter(r["collective"] for r in rows)))
    out.append(_table("by interconnect", Counter(r["interconnect"] for r in rows)))
    out.append(_table("by ranks", Counter(_rank_bucket(r.get("ranks")) for r in rows)))
    out.append(
        _table(
            "by algorithm (null = NCCL default, not reported)", Counter(str(r.get("algorithm")) for r in rows)
        )
    )
    out.append(_table("by confidence", Counter(r["confidence"] for r in rows)))
    out.append(_table("by source", Counter(r["source"] for r in rows)))
    # Scaling series: one fixed message size, bandwidth against node count.
    out.append("  scaling with node count (same source, collective and message size; GB/s):")
    multi = [r for r in rows if _bw(r) is not None]
    groups = _series(
        multi, lambda r: (r["source"], r["gpu"], r["collective"], r.get("message_bytes"), r.get("algorithm"))
    )
    for (src, gpu, coll, nbytes, algo), rs in sorted(groups.items(), key=str):
        by_nodes = {r["nodes"]: _bw(r) for r in rs if _is_number(r.get("nodes"))}
        if len(by_nodes) < 3:
            continue
        pts = ", ".join(f"{n}n:{v:g}" for n, v in sorted(by_nodes.items()))
        size = f"{nbytes / 2**20:g}MiB" if _is_number(nbytes) else "size n/s"
        out.append(f"    {src} {gpu} {coll} {size} algo={algo}: {pts}")
    # Small-message latency against rank count.
    lat = [
        r
        for r in rows
        if r["collective"] == "all_reduce"
        and _is_number(r.get("time_us"))
        and _is_number(r.get("message_bytes"))
        and r["message_bytes"] <= 1024
    ]
    out.append("  small-message all-reduce time (<= 1 KiB), min over sizes, by ranks:")
    for (src, gpu, ranks, algo), rs in sorted(
        _series(lat, lambda r: (r["source"], r["gpu"], r.get("ranks"), r.get("algorithm"))).items(), key=str
    ):
        out.append(f"    {src} {gpu} ranks={ranks} algo={algo}: {min(r['time_us'] for r in rs):g} us")
    return "\n".join(out)


def report_gemm(data: dict[str, Any]) -> str:
    rows = data["rows"]
    out = [f"gemm.json: {len(rows)} rows from {len({r['source'] for r in rows})} sources"]
    out.append(_table("by gpu / precision", Counter((r["gpu"], r["precision"]) for r in rows), width=56))
    out.append(_table("by kind", Counter(r.get("kind") for r in rows)))
    out.append("  best achieved / spec peak (sources stating a peak):")
    for r in sorted(
        (r for r in rows if _is_number(r.get("spec_peak_tflops"))), key=lambda r: (r["precision"], r["gpu"])
    ):
        out.append(
            f"    {r['gpu']:<20} {r['precision']:<9} {r['tflops']:>8g} / {r['spec_peak_tflops']:<6g} = {r['tflops'] / r['spec_peak_tflops']:.1%}"
            f"  at {r['m']}x{r['n']}x{r['k']}"
        )
    xla = [r for r in rows if r["source"] == "xla-matmul-perf-table"]
    if xla:
        out.append(
            "  shape dependence (XLA sm_90 bf16, b=1; m=n=k, or one dimension 256 and another 4096): TFLOP/s"
        )
        for r in sorted(xla, key=lambda r: r["m"] * r["n"] * r["k"]):
            dims = (r["m"], r["n"], r["k"])
            if len(set(dims)) == 1 or (min(dims) == 256 and max(dims) == 4096):
                out.append(f"    {r['m']}x{r['n']}x{r['k']}: {r['tflops']:g}")
    return "\n".join(out)


def report_attention(data: dict[str, Any]) -> str:
    rows = data["rows"]
    out = [f"attention.json: {len(rows)} rows from {len({r['source'] for r in rows})} sources"]
    out.append(
        _table(
            "by gpu / precision / pass",
            Counter((r["gpu"], r["precision"], r["pass"]) for r in rows),
            width=40,
        )
    )
    out.append(_table("by implementation", Counter(r["implementation"] for r in rows), width=60))
    out.append(
        _table(
            "by head_dim_qk / causal",
            Counter((r.get("head_dim_qk"), r.get("causal")) for r in rows),
            width=30,
        )
    )
    out.append("  peak reported TFLOP/s by gpu / precision / pass (any shape):")
    best: dict[tuple[str, str, str], Row] = {}
    for r in rows:
        key = (r["gpu"], r["precision"], r["pass"])
        if key not in best or r["tflops"] > best[key]["tflops"]:
            best[key] = r
    for key, r in sorted(best.items()):
        shape = f"S={r.get('seqlen_q')} d={r.get('head_dim_qk')} causal={r.get('causal')}"
        out.append(f"    {' / '.join(key):<30} {r['tflops']:>8g}  {r['implementation']} ({shape})")
    return "\n".join(out)


FILES: dict[str, tuple[Callable[[Row], list[str]], Callable[[dict[str, Any]], str]]] = {
    "nccl_tests.json": (_check_nccl, report_nccl),
    "gemm.json": (_check_gemm, report_gemm),
    "attention.json": (_check_attention, report_attention),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DATA_DIR, help="folder holding the three JSON files")
    ap.add_argument("--quiet", action="store_true", help="print only validation problems and counts")
    args = ap.parse_args(argv)
    problems: list[str] = []
    for name, (check, report) in FILES.items():
        data = json.loads((args.dir / name).read_text())
        problems += validate(name, data, check)
        print(f"{name}: {len(data['rows'])} rows" if args.quiet else report(data) + "\n")
    if problems:
        print(f"{len(problems)} validation problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print("validation: all rows have a source, a url and a location; all numbers positive")
    return 0


if __name__ == "__main__":
    sys.exit(main())
