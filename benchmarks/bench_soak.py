"""Soak benchmark (figures, not a test): hostile requests mixed with normal load against gunicorn on PostgreSQL.

1. creates a scratch PostgreSQL database (default ``fp_bench_soak``), migrates and seeds it (tests/security/seed.py);
2. starts ``gunicorn planner.wsgi`` (``--workers``, web timeout 30 s as deployed);
3. runs the normal stream alone (baseline), then the normal and hostile streams together for ``--duration`` s
   (tests/security/soak.py: 1e308 GPUs, ±1e400 seeds, non-integral and string numbers in every numeric field,
   lone surrogates in keys and values, non-UTF-8 bytes, junk sweep axes, deep JSON);
4. prints the normal stream's p50/p95 in both phases, the hostile stream's status counts, and whether the
   soak passed (no 5xx, no hostile request accepted, normal p95 within noise: <= 1.5x baseline + 25 ms).

    .venv/bin/python benchmarks/bench_soak.py                 # 60 s mixed phase, 3 gunicorn workers
    .venv/bin/python benchmarks/bench_soak.py --duration 300  # a longer soak

Requires PostgreSQL and Redis (REDIS_URL db 5 by default). Exits 1 if the soak failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default="fp_bench_soak")
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    p.add_argument("--port", type=int, default=8131)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of the mixed phase")
    p.add_argument("--baseline", type=float, default=20.0, help="seconds of the normal-only phase")
    args = p.parse_args()

    from bench_load import drop_database, recreate_database, stop, wait_http

    recreate_database(args.pg, args.db)
    env = dict(os.environ, DATABASE_URL=f"{args.pg}/{args.db}", REDIS_URL=args.redis,
               DJANGO_SETTINGS_MODULE="planner.settings", LOG_LEVEL="ERROR", PYTHONPATH=str(ROOT))
    env.setdefault("FP_VAR_DIR", str(ROOT / "var" / "bench-soak"))
    os.environ.update(env)
    gunicorn = None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", "--noinput", verbosity=0)
        with contextlib.suppress(Exception):
            call_command("createcachetable", verbosity=0)
        from accounts.models import ApiToken
        from tests.security import soak
        from tests.security.seed import seed_world

        world = seed_world()
        h = world.home
        _, token = ApiToken.issue(user=h.users["admin"], team=h.team, name="soak")
        compare = (f"/api/v1/reports/compare/?runs={h.run.pk},{h.sweep.runs.order_by('pk').first().pk}"
                   f"&baseline={h.run.pk}")
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "planner.wsgi:application", "--workers", str(args.workers),
             "--bind", f"127.0.0.1:{args.port}", "--log-level", "warning", "--timeout", "30"],
            cwd=ROOT, env=env, start_new_session=True,
        )
        base = f"http://127.0.0.1:{args.port}"
        wait_http(f"{base}/healthz")
        t0 = time.monotonic()
        figures = soak.soak(base, {"Authorization": f"Token {token}"}, soak.normal_requests([h.scenario.pk], compare),
                            soak.hostile_requests(h.scenario.pk), baseline_s=args.baseline, mixed_s=args.duration)
        b, m, hostile = figures["baseline"], figures["mixed"], figures["hostile"]
        ok = (figures["normal_5xx"] == 0 and figures["hostile_5xx"] == 0 and figures["hostile_2xx"] == 0
              and b["errors"] == 0 and m["errors"] == 0 and soak.p95_within_noise(b["p95_ms"], m["p95_ms"]))
        print(f"soak: {args.duration:.0f} s mixed after {args.baseline:.0f} s baseline, {args.workers} gunicorn workers "
              f"({time.monotonic() - t0:.0f} s)")
        print(f"  normal  baseline: {b['requests']:6d} req  {b['rps']:7.1f} req/s  p50 {b['p50_ms']:7.1f} ms  "
              f"p95 {b['p95_ms']:7.1f} ms  errors {b['errors']}")
        print(f"  normal  mixed:    {m['requests']:6d} req  {m['rps']:7.1f} req/s  p50 {m['p50_ms']:7.1f} ms  "
              f"p95 {m['p95_ms']:7.1f} ms  errors {m['errors']}  (p95 ratio {figures['p95_ratio']})")
        print(f"  hostile:          {hostile['requests']:6d} req  {hostile['rps']:7.1f} req/s  p50 {hostile['p50_ms']:7.1f} ms"
              f"  p95 {hostile['p95_ms']:7.1f} ms  max {hostile['max_ms']} ms  statuses {hostile['statuses']}")
        print(json.dumps({"soak": {k: v for k, v in figures.items() if k not in ("baseline", "mixed", "hostile")},
                          "passed": ok}))
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        stop(gunicorn)
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        drop_database(args.pg, args.db)


if __name__ == "__main__":
    raise SystemExit(main())
