"""Load benchmark (a figure, not a test): gunicorn on PostgreSQL, load from a second process on loopback.

What it does
1. creates a scratch PostgreSQL database (default ``fp_bench`` on 127.0.0.1), migrates and seeds it
   (two teams, the default catalog, scenarios, ~200 finished runs, sweeps and reports) through the services;
2. starts ``gunicorn planner.wsgi`` with ``--workers`` processes on 127.0.0.1;
3. drives it with benchmarks/loadgen.py (asyncio + httpx, closed loop) in a *separate process*, one
   phase per endpoint group (list endpoints, the compare report, the preview endpoint), then a mixed
   phase at 32 connections for 30 s that must finish with zero errors;
4. measures run throughput: queues N TCO runs through the API, then starts one ``celery worker``
   (concurrency 1) and times it draining them → simulations per minute per worker.

Everything binds to and targets 127.0.0.1. Requires PostgreSQL and Redis (REDIS_URL db 5 by default).

    .venv/bin/python benchmarks/bench_load.py                     # defaults: 3 gunicorn workers
    .venv/bin/python benchmarks/bench_load.py --workers 4 --mixed-duration 60 --runs 60

Prints a table and a JSON summary; exits 1 if the mixed phase saw any error.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default="fp_bench", help="scratch database name (dropped and recreated)")
    p.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--workers", type=int, default=3, help="gunicorn worker processes")
    p.add_argument("--concurrency", type=int, default=32, help="client connections")
    p.add_argument("--phase-duration", type=float, default=10.0, help="seconds per endpoint phase")
    p.add_argument("--mixed-duration", type=float, default=30.0, help="seconds of the mixed zero-error phase")
    p.add_argument("--runs", type=int, default=200, help="runs queued for the throughput measurement")
    p.add_argument("--run-kind", default="tco", choices=("predict", "search", "tco"))
    p.add_argument("--keep", action="store_true", help="keep the scratch database")
    return p.parse_args()


def recreate_database(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def seed(n_runs: int = 200) -> dict[str, Any]:
    """Seed through the services; clone one executed run's result so list pages hold real payloads."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    with contextlib.suppress(Exception):  # Redis cache in full mode: no table needed
        call_command("createcachetable", verbosity=0)
    from accounts.models import ApiToken
    from planning import services as planning
    from simulations.models import Report, SimulationRun
    from tests.security.seed import CLUSTER, seed_world

    world = seed_world()
    h = world.home
    admin = h.users["admin"]
    scenarios = [h.scenario]
    for i in range(30):
        scenarios.append(planning.scenario_create(team=h.team, user=admin, name=f"bench scenario {i:02d}",
                                                  workload=h.workload,
                                                  cluster={**CLUSTER, "nic_gbps": (100, 200, 400, 800)[i % 4],
                                                           "oversubscription": 1.0 + (i % 8) / 4}))
    template = SimulationRun.objects.get(pk=h.run.pk)
    clones = []
    for i in range(n_runs):
        clone = SimulationRun.objects.get(pk=template.pk)
        clone.pk = None
        clone.id = None
        clone.scenario = scenarios[i % len(scenarios)]
        clone.label = f"bench run {i}"
        clone.input_hash = f"{i:064x}"
        clones.append(clone)
    SimulationRun.objects.bulk_create(clones)
    compare_ids = [h.run.pk, *SimulationRun.objects.filter(team=h.team, status="succeeded")
                   .exclude(pk=h.run.pk).order_by("pk").values_list("pk", flat=True)[:3]]
    for i in range(20):
        r = Report.objects.create(team=h.team, name=f"bench report {i}", baseline=h.run, created_by=admin)
        r.runs.set(compare_ids)
    _, raw = ApiToken.issue(user=admin, team=h.team, name="bench")
    return {"token": raw, "scenario_ids": [s.pk for s in scenarios], "compare_ids": compare_ids,
            "report_id": h.report.pk, "team": h.team.slug}


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up in {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def loadgen(spec: dict[str, Any], duration: float, concurrency: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "loadgen.py"), "--spec", "-", "--duration", str(duration),
         "--concurrency", str(concurrency)],
        input=json.dumps(spec), capture_output=True, text=True, timeout=duration + 120, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_throughput(args: argparse.Namespace, env: dict[str, str], base: str, token: str,
                   scenario_ids: list[int]) -> dict[str, Any]:
    """Queue N runs through the API first, then start one worker (concurrency 1) and time it draining
    the queue: pure execution throughput (engine + claim/heartbeat/finish protocol + broker), per worker."""
    import httpx
    from django.db import connection

    from planner.celery import app
    from simulations.models import SimulationRun

    app.control.purge()
    headers = {"Authorization": f"Token {token}"}
    ids = []
    started = time.monotonic()
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        for i in range(args.runs):
            sid = scenario_ids[i % len(scenario_ids)]
            resp = client.post(f"/api/v1/scenarios/{sid}/run/", json={"kind": args.run_kind, "force": True})
            resp.raise_for_status()
            ids.append(resp.json()["id"])
    submit_s = time.monotonic() - started
    log = open(Path(env["FP_VAR_DIR"]) / "bench-worker.log", "wb")  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "planner", "worker", "-Q", "simulations,default", "-c", "1",
         "-P", "prefork", "-n", f"bench-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in Path(log.name).read_bytes() and time.monotonic() < deadline:
            time.sleep(0.1)
        ready = time.monotonic()
        while True:
            connection.close()
            done = SimulationRun.objects.filter(pk__in=ids, status__in=("succeeded", "failed", "cancelled")).count()
            if done == len(ids) or time.monotonic() - ready > 900:
                break
            time.sleep(0.2)
        elapsed = time.monotonic() - ready
        runs = list(SimulationRun.objects.filter(pk__in=ids))
        durations = sorted((r.finished_at - r.started_at).total_seconds() for r in runs if r.started_at and r.finished_at)
        return {
            "runs": len(ids), "succeeded": sum(r.status == "succeeded" for r in runs),
            "failed": sum(r.status == "failed" for r in runs), "kind": args.run_kind,
            "submit_s": round(submit_s, 2), "drain_s": round(elapsed, 2),
            "runs_per_min_per_worker": round(len(ids) / elapsed * 60, 1),
            "exec_median_s": round(durations[len(durations) // 2], 3) if durations else None,
            "failure_samples": sorted({r.error[:200] for r in runs if r.status == "failed"})[:3],
        }
    finally:
        stop(worker)
        log.close()


def main() -> int:
    args = parse_args()
    var = Path("/tmp/fp-bench-var")
    var.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"{args.pg}/{args.db}", REDIS_URL=args.redis, DJANGO_SETTINGS_MODULE="planner.settings",
        DJANGO_ENV="development", DEBUG="0", LOG_LEVEL="WARNING", FP_VAR_DIR=str(var), PYTHONPATH=str(ROOT),
        ALLOWED_HOSTS="127.0.0.1,localhost", CELERY_TASK_ALWAYS_EAGER="0",
    )
    os.environ.update(env)
    recreate_database(args.pg, args.db)
    gunicorn = None
    try:
        t0 = time.monotonic()
        seeded = seed()
        print(f"seeded in {time.monotonic() - t0:.1f} s", flush=True)
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "planner.wsgi:application", "--workers", str(args.workers),
             "--bind", f"127.0.0.1:{args.port}", "--log-level", "warning", "--timeout", "60"],
            cwd=ROOT, env=env, start_new_session=True,
        )
        base = f"http://127.0.0.1:{args.port}"
        wait_http(f"{base}/healthz")
        headers = {"Authorization": f"Token {seeded['token']}"}
        runs = ",".join(str(i) for i in seeded["compare_ids"])
        sid = seeded["scenario_ids"][0]
        phases = {
            "GET /api/v1/runs/": [{"method": "GET", "path": "/api/v1/runs/"}],
            "GET /api/v1/scenarios/": [{"method": "GET", "path": "/api/v1/scenarios/"}],
            "GET /api/v1/fleets/": [{"method": "GET", "path": "/api/v1/fleets/"}],
            "GET /api/v1/catalog-items/?latest=true": [{"method": "GET", "path": "/api/v1/catalog-items/?latest=true"}],
            "GET /api/v1/reports/": [{"method": "GET", "path": "/api/v1/reports/"}],
            "GET /api/v1/reports/compare (4 runs)": [
                {"method": "GET", "path": f"/api/v1/reports/compare/?runs={runs}&baseline={seeded['compare_ids'][0]}"}],
            "POST /api/v1/preview/ (saved scenario)": [{"method": "POST", "path": "/api/v1/preview/",
                                                        "json": {"scenario": sid}}],
        }
        # warm up every gunicorn worker (imports, DB connections)
        loadgen({"base": base, "headers": headers, "requests": list(itertools.chain.from_iterable(phases.values()))}, 3, args.workers * 2)
        results: dict[str, Any] = {}
        for name, reqs in phases.items():
            results[name] = loadgen({"base": base, "headers": headers, "requests": reqs}, args.phase_duration,
                                    args.concurrency)
            r = results[name]
            print(f"{name:45s} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:7.1f}  p95 {r['p95_ms']:7.1f}  "
                  f"p99 {r['p99_ms']:7.1f} ms  errors {r['errors']}", flush=True)
        mixed = loadgen({"base": base, "headers": headers, "requests": list(itertools.chain.from_iterable(phases.values()))},
                        args.mixed_duration, args.concurrency)
        results["mixed"] = mixed
        print(f"{'mixed (all of the above)':45s} {mixed['rps']:8.1f} req/s  p50 {mixed['p50_ms']:7.1f}  "
              f"p95 {mixed['p95_ms']:7.1f}  p99 {mixed['p99_ms']:7.1f} ms  errors {mixed['errors']} "
              f"({mixed['requests']} requests, {args.concurrency} connections, {args.mixed_duration:.0f} s)", flush=True)
        throughput = run_throughput(args, env, base, seeded["token"], seeded["scenario_ids"])
        print(f"run throughput: {throughput['runs_per_min_per_worker']} {throughput['kind']} runs/min per worker "
              f"({throughput['succeeded']}/{throughput['runs']} succeeded, queue drained in {throughput['drain_s']} s; "
              f"median execution {throughput['exec_median_s']} s)", flush=True)
        summary = {"workers": args.workers, "concurrency": args.concurrency, "cpus": os.cpu_count(),
                   "phases": results, "throughput": throughput}
        print(json.dumps(summary))
        return 0 if mixed["errors"] == 0 and throughput["failed"] == 0 else 1
    finally:
        stop(gunicorn)
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(args.pg, args.db)


if __name__ == "__main__":
    raise SystemExit(main())
