"""A small closed-loop HTTP load generator (asyncio + httpx), bounded in time.

``concurrency`` workers share one connection pool; each sends its next request as soon as the previous
answer arrives (closed loop, like wrk). Requests cycle through the given list. Only loopback targets are
accepted. Prints one JSON line: requests, errors (non-2xx or transport errors), req/s and latency
percentiles in milliseconds.

    python benchmarks/loadgen.py --spec spec.json --duration 30 --concurrency 32

``spec.json``: {"base": "http://127.0.0.1:8123", "headers": {...},
                "requests": [{"method": "GET", "path": "/api/v1/runs/"}, {"method": "POST", "path": ..., "json": {...}}]}

A request may give ``"content"`` (a latin-1 string: each character is one byte of the raw body) and
``"content_type"`` instead of ``"json"``, for bodies no JSON encoder would produce (invalid UTF-8, escapes).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import httpx


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


async def run(spec: dict[str, Any], duration: float, concurrency: int) -> dict[str, Any]:
    host = urlsplit(spec["base"]).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"refusing to load-test a non-loopback host: {host}")
    requests = spec["requests"]
    counter = itertools.count()
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(30.0)
    deadline = time.perf_counter() + duration

    async with httpx.AsyncClient(base_url=spec["base"], headers=spec.get("headers", {}), limits=limits,
                                 timeout=timeout) as client:

        async def worker() -> None:
            while time.perf_counter() < deadline:
                req = requests[next(counter) % len(requests)]
                started = time.perf_counter()
                try:
                    if "content" in req:  # raw body: latin-1 text carries any bytes (hostile streams)
                        resp = await client.request(req["method"], req["path"], content=req["content"].encode("latin-1"),
                                                    headers={"Content-Type": req.get("content_type", "application/json")})
                    else:
                        resp = await client.request(req["method"], req["path"], json=req.get("json"))
                    await resp.aread()
                    code = resp.status_code
                except httpx.HTTPError as exc:
                    code = 0
                    errors.append(f"{req['method']} {req['path']}: {exc.__class__.__name__}: {exc}")
                latencies.append((time.perf_counter() - started) * 1000)
                statuses[str(code)] += 1
                if not 200 <= code < 300 and code and len(errors) < 20:
                    errors.append(f"{req['method']} {req['path']}: HTTP {code}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started

    latencies.sort()
    n = len(latencies)
    bad = sum(v for k, v in statuses.items() if not k.startswith("2"))
    return {
        "requests": n,
        "errors": bad,
        "statuses": dict(statuses),
        "seconds": round(elapsed, 2),
        "rps": round(n / elapsed, 1) if elapsed else 0.0,
        "p50_ms": round(percentile(latencies, 0.50), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "max_ms": round(latencies[-1], 1) if latencies else None,
        "error_samples": errors[:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="JSON file (see module docstring), or - for stdin")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds (bounded run)")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    if args.spec == "-":
        spec = json.load(sys.stdin)
    else:
        with open(args.spec) as fh:
            spec = json.load(fh)
    result = asyncio.run(run(spec, args.duration, args.concurrency))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
