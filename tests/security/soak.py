"""The soak: a stream of hostile requests mixed with normal load, against a real gunicorn.

Shared by the integration test (tests/security/test_soak.py) and the benchmark (benchmarks/bench_soak.py).
Both streams are closed-loop clients in separate processes (benchmarks/loadgen.py): the *normal* stream reads
lists, details and the compare report and asks for previews; the *hostile* stream sends every class of input
the probe of issue #11 used (huge and non-integral numbers in every numeric field, 1e308 GPUs, ±1e400 seeds,
lone surrogates in keys and values, bytes that are not UTF-8, junk sweep axes, deep JSON, strings for numbers).
A hostile request must be refused cheaply (4xx, never 5xx) so that the normal stream's p95 does not move.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from engine.schema.bounds import BOUNDS

ROOT = Path(__file__).resolve().parent.parent.parent
LOADGEN = ROOT / "benchmarks" / "loadgen.py"

# Every numeric field a hostile client can reach: scenario document fields (via preview overrides and sweep
# axes) and run parameters. Values: far too large, not finite as text, not integral, wrong type.
HOSTILE_NUMBERS = ["1e308", "-1e308", "1e400", "-1e400", "1" + "0" * 400, "0.5", "-0.5", "true", '"1024"', "null",
                   "[]", "{}", '{"low": 1, "high": 1e308}']
DOCUMENT_NUMBERS = [
    "cluster.gpus", "cluster.gpus_per_node", "cluster.nics_per_node", "cluster.nic_gbps", "cluster.oversubscription",
    "cluster.pod_gpus", "cluster.tiers", "model.layers", "model.hidden", "model.heads", "model.kv_heads",
    "model.ffn_hidden", "model.vocab", "model.seq_len", "training.global_batch", "training.micro_batch",
    "training.tokens", "parallelism.tp", "parallelism.pp", "parallelism.dp", "costs.usd_per_kwh", "costs.pue",
]


def _raw(method: str, path: str, text: str | bytes, content_type: str = "application/json") -> dict[str, Any]:
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return {"method": method, "path": path, "content": data.decode("latin-1"), "content_type": content_type}


def hostile_requests(scenario_id: int) -> list[dict[str, Any]]:
    """One request per hostile class (about 100), each answered 4xx by a correct server."""
    out: list[dict[str, Any]] = []
    preview = "/api/v1/preview/"
    run = f"/api/v1/scenarios/{scenario_id}/run/"
    sweep = f"/api/v1/scenarios/{scenario_id}/sweep/"
    for field in DOCUMENT_NUMBERS:
        non_integral = ("2.5",) if BOUNDS[field].kind == "int" else ()  # 2.5 is a legal real value
        for value in ("1e308", "1" + "0" * 400, '"1024"', "true", *non_integral):
            out.append(_raw("POST", preview, f'{{"scenario": {scenario_id}, "overrides": {{"{field}": {value}}}}}'))
    for param in ("monte_carlo", "seed"):
        for value in HOSTILE_NUMBERS:
            out.append(_raw("POST", run, f'{{"kind": "tco", "params": {{"{param}": {value}}}}}'))
    for value in ('"lots"', "null", "[]", "{}", "0", "-8", "1e308", "[[[[[[1]]]]]]", '{"a": {"b": 1}}'):
        out.append(_raw("POST", sweep, f'{{"kind": "predict", "axes": {{"cluster.gpus": [{value}]}}}}'))
    out.append(_raw("POST", sweep, '{"kind": "predict", "axes": {"cluster.gpus": ' + "[" * 5000 + "]" * 5000 + "}}"))
    for text in (f'{{"scenario": {scenario_id}, "overrides": {{"costs.prices.\\ud800": 1}}}}',
                 '{"document": {"costs": {"prices": {"\\ud800": 1}}}}',
                 '{"\\udfff": "\\ud800"}', '{"name": "a\\udc00\\ud800b"}'):
        out.append(_raw("POST", preview, text))
        out.append(_raw("POST", "/api/v1/workloads/", text))
    for junk in (b'{"name": "\xed\xa0\x80"}', b'{"\xc0\xaf": 1}', b"\xff\xfe", b'{"name": "x"'):
        out.append(_raw("POST", preview, junk))
    out.append(_raw("POST", preview, "[" * 100_000 + "]" * 100_000))
    out.append(_raw("POST", preview, '{"document": {"model": {}}}'))
    return out


def normal_requests(scenario_ids: list[int], compare: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"method": "GET", "path": "/api/v1/runs/?page_size=20"},
                                 {"method": "GET", "path": compare}]
    for sid in scenario_ids[:4]:
        out.append({"method": "GET", "path": f"/api/v1/scenarios/{sid}/"})
        out.append({"method": "POST", "path": "/api/v1/preview/", "json": {"scenario": sid}})
    return out


def loadgen(spec: dict[str, Any], duration: float, concurrency: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(LOADGEN), "--spec", "-", "--duration", str(duration), "--concurrency", str(concurrency)],
        input=json.dumps(spec), capture_output=True, text=True, timeout=duration + 120, check=True,
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def soak(base: str, headers: dict[str, str], normal: list[dict[str, Any]], hostile: list[dict[str, Any]], *,
         baseline_s: float = 20.0, mixed_s: float = 60.0, normal_concurrency: int = 4,
         hostile_concurrency: int = 2) -> dict[str, Any]:
    """Baseline (normal stream alone), then the normal and hostile streams together; figures of both."""
    normal_spec = {"base": base, "headers": headers, "requests": normal}
    hostile_spec = {"base": base, "headers": headers, "requests": hostile}
    loadgen(normal_spec, 3.0, normal_concurrency)  # warm-up: imports, connection pools, caches
    baseline = loadgen(normal_spec, baseline_s, normal_concurrency)
    results: dict[str, Any] = {}

    def hostile_stream() -> None:
        results["hostile"] = loadgen(hostile_spec, mixed_s, hostile_concurrency)

    thread = threading.Thread(target=hostile_stream)
    thread.start()
    mixed = loadgen(normal_spec, mixed_s, normal_concurrency)
    thread.join()
    hostile_out = results["hostile"]
    five_xx = {k: v for k, v in {**hostile_out["statuses"]}.items() if k.startswith("5") or k == "0"}
    return {
        "baseline": baseline,
        "mixed": mixed,
        "hostile": hostile_out,
        "hostile_5xx": sum(five_xx.values()),
        "hostile_2xx": sum(v for k, v in hostile_out["statuses"].items() if k.startswith("2")),
        "normal_5xx": sum(v for k, v in {**baseline["statuses"], **mixed["statuses"]}.items()
                          if k.startswith("5") or k == "0"),
        "p95_ratio": round(mixed["p95_ms"] / baseline["p95_ms"], 3) if baseline["p95_ms"] else None,
    }


def p95_within_noise(baseline_ms: float, mixed_ms: float) -> bool:
    """Unchanged within noise: at most 1.5x the baseline p95 plus 25 ms (a shared 2-core CI machine jitters)."""
    return mixed_ms <= 1.5 * baseline_ms + 25.0
