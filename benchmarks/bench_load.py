"""Load benchmark (a figure, not a test): gunicorn and a Celery worker, load from a second process on loopback.

What it does
1. creates a scratch database — full mode (``DATABASE_URL`` and ``REDIS_URL`` set, or ``--mode full``): a PostgreSQL
   database ``fp_bench`` on that server and Redis db 5; embedded mode (otherwise): SQLite and the SQLite-backed
   broker in a temporary ``FP_VAR_DIR`` — migrates and seeds it (two teams, the default catalog, scenarios, ~200
   finished runs, sweeps and reports, upload fleets) through the services;
2. starts ``gunicorn planner.wsgi`` with ``--workers`` processes (web timeout 30 s, as deployed) on 127.0.0.1;
3. drives it with benchmarks/loadgen.py (asyncio + httpx, closed loop) in *separate processes*, one phase per
   endpoint group (list endpoints, the compare report, the preview endpoint), then **the load of issue #23**:
   ``--concurrency`` (32) clients on the mixed requests for ``FP_LOAD_SECONDS`` (60) s while ``--upload-clients`` (4)
   clients upload maximum-size step logs (``FP_CALIBRATION_MAX_UPLOAD_BYTES``, multipart) and one ``celery worker``
   imports them. Target: 0 errors, p95 of the others < 1 s; it prints clients, requests, errors, p50/p95 of both
   groups and a PASS/FAIL line;
4. measures run throughput: queues N TCO runs through the API, then starts one ``celery worker``
   (concurrency 1) and times it draining them → simulations per minute per worker.

Everything binds to and targets 127.0.0.1.

    .venv/bin/python benchmarks/bench_load.py                        # 60 s load, 3 gunicorn workers
    FP_LOAD_SECONDS=10 .venv/bin/python benchmarks/bench_load.py     # a quick check (phases and runs scale down)
    .venv/bin/python benchmarks/bench_load.py --workers 4 --runs 60 --mode embedded

Prints a table and a JSON summary; exits 1 if the load missed its targets or a queued run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    load_s = float(os.environ.get("FP_LOAD_SECONDS") or 60)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", default="auto", choices=("auto", "full", "embedded"),
                   help="full: PostgreSQL + Redis; embedded: SQLite; auto: full when DATABASE_URL and REDIS_URL are set")
    p.add_argument("--db", default="fp_bench", help="scratch database name, full mode (dropped and recreated)")
    p.add_argument("--pg", default="", help="PostgreSQL server URL (default: DATABASE_URL's server, or 127.0.0.1)")
    p.add_argument("--redis", default="", help="Redis URL (default: REDIS_URL's server, db 5)")
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--workers", type=int, default=3, help="gunicorn worker processes")
    p.add_argument("--concurrency", type=int, default=32, help="client connections of the mixed requests")
    p.add_argument("--upload-clients", type=int, default=4, help="clients uploading maximum-size step logs")
    p.add_argument("--load-seconds", type=float, default=load_s, help="seconds of the load (env FP_LOAD_SECONDS)")
    p.add_argument("--phase-duration", type=float, default=min(10.0, load_s / 6), help="seconds per endpoint phase")
    p.add_argument("--runs", type=int, default=max(20, round(200 * min(load_s, 60) / 60)),
                   help="runs queued for the throughput measurement")
    p.add_argument("--run-kind", default="tco", choices=("predict", "search", "tco"))
    p.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = p.parse_args()
    if args.mode == "auto":
        args.mode = "full" if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL") else "embedded"
    if not args.pg:
        url = urlsplit(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432")
        args.pg = f"{url.scheme}://{url.netloc}"
    if not args.redis:
        url = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379")
        args.redis = f"{url.scheme}://{url.netloc}/5"
    return args


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
    upload_fleets = [planning.fleet_create(team=h.team, user=admin, name=f"bench upload pod {i}",
                                           server_model="HGX-A100-80GB", server_count=8, nic_gbps=200).pk
                     for i in range(8)]  # 500 files per fleet at most: uploads cycle over 8 fleets
    return {"token": raw, "scenario_ids": [s.pk for s in scenarios], "compare_ids": compare_ids,
            "report_id": h.report.pk, "team": h.team.slug, "upload_fleets": upload_fleets}


UPLOAD_RUN = "llama7b-64gpu-bf16"  # examples/calibration/manifest.json: a NeMo step log and its scenario


def max_size_step_log() -> tuple[bytes, dict[str, Any]]:
    """A NeMo step log of exactly the upload limit (FP_CALIBRATION_MAX_UPLOAD_BYTES) and its run's scenario."""
    from planning.services.calibration import max_upload_bytes

    manifest = json.loads((ROOT / "examples" / "calibration" / "manifest.json").read_text(encoding="utf-8"))
    run = next(r for r in manifest["runs"] if r["id"] == UPLOAD_RUN)
    scenario = {k: run["scenario"][k] for k in ("model", "training", "parallelism")}
    scenario["cluster"] = {"gpus": run["scenario"]["cluster"]["gpus"]}
    limit, batch = max_upload_bytes(), int(run["scenario"]["training"]["global_batch"])
    out, size, i = [b"# SYNTHETIC step log of maximum size (benchmarks/bench_load.py)\n"], 0, 0
    size = len(out[0])
    while True:
        line = (f"Training epoch 0, iteration {i}/999999 | lr: 1.499e-04 | global_batch_size: {batch} | "
                f"global_step: {i} | reduced_train_loss: 7.4000 | train_step_timing in s: "
                f"{run['true_step_time_s'] * (1 + 0.01 * ((i * 7919) % 11 - 5) / 5):.3f} | "
                f"consumed_samples: {batch * (i + 1)}\n").encode()
        if size + len(line) > limit:
            break
        out.append(line)
        size += len(line)
        i += 1
    return b"".join(out), scenario


def upload_requests(fleets: list[int]) -> list[dict[str, Any]]:
    """One multipart upload of a maximum-size step log per fleet (loadgen sends ``content`` as raw bytes)."""
    data, scenario = max_size_step_log()
    boundary = "fp-bench-" + "7" * 24
    requests = []
    for fleet in fleets:
        parts = [(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n').encode()
                 for name, value in (("fleet", fleet), ("kind", "step-log"), ("scenario", json.dumps(scenario)))]
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="steps.log"\r\n'
                     "Content-Type: text/plain\r\n\r\n".encode() + data + f"\r\n--{boundary}--\r\n".encode())
        requests.append({"method": "POST", "path": "/api/v1/calibration-files/",
                         "content": b"".join(parts).decode("latin-1"),
                         "content_type": f"multipart/form-data; boundary={boundary}"})
    return requests


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


def start_worker(env: dict[str, str], name: str) -> tuple[subprocess.Popen[bytes], Any]:
    """One ``celery worker`` (concurrency 1) on both queues; returns once it is ready (at most 60 s)."""
    log = open(Path(env["FP_VAR_DIR"]) / f"bench-worker-{name}.log", "wb")  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "planner", "worker", "-Q", "simulations,default", "-c", "1",
         "-P", "prefork", "-n", f"bench-{name}-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "-l",
         "INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while b"ready." not in Path(log.name).read_bytes() and time.monotonic() < deadline:
        time.sleep(0.1)
    return worker, log


def run_throughput(args: argparse.Namespace, env: dict[str, str], base: str, token: str,
                   scenario_ids: list[int]) -> dict[str, Any]:
    """Queue N runs through the API first, then start one worker (concurrency 1) and time it draining
    the queue: pure execution throughput (engine + claim/heartbeat/finish protocol + broker), per worker."""
    import httpx
    from django.db import connection

    from planner.celery import app
    from simulations.models import SimulationRun

    with contextlib.suppress(Exception):  # the embedded broker may not support purge
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
    worker, log = start_worker(env, "throughput")
    try:
        ready = time.monotonic()
        while True:
            connection.close()
            done = SimulationRun.objects.filter(pk__in=ids, status__in=("succeeded", "failed", "cancelled")).count()
            if done == len(ids) or time.monotonic() - ready > 300:
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


P95_TARGET_MS = 1000.0  # issue #23: p95 of the other clients while uploads run


def load_with_uploads(args: argparse.Namespace, base: str, headers: dict[str, str], mixed: list[dict[str, Any]],
                      uploads: list[dict[str, Any]]) -> dict[str, Any]:
    """The load of issue #23: the mixed requests and the uploads at the same time, each from its own process."""
    results: dict[str, Any] = {}

    def uploading() -> None:
        results["uploads"] = loadgen({"base": base, "headers": headers, "requests": uploads}, args.load_seconds,
                                     args.upload_clients)

    thread = threading.Thread(target=uploading)
    thread.start()
    results["others"] = loadgen({"base": base, "headers": headers, "requests": mixed}, args.load_seconds,
                                args.concurrency)
    thread.join()
    others, up = results["others"], results["uploads"]
    row = "  {:8s} {:>8} {:>9} {:>7} {:>8} {:>9} {:>9} {:>9}"
    print(row.format("", "clients", "requests", "errors", "req/s", "p50 ms", "p95 ms", "max ms"))
    for name, r, n in (("others", others, args.concurrency), ("uploads", up, args.upload_clients)):
        print(row.format(name, n, r["requests"], r["errors"], r["rps"], r["p50_ms"], r["p95_ms"], r["max_ms"]))
        for sample in r["error_samples"]:
            print(f"    {name} error: {sample[:200]}")
    errors = others["errors"] + up["errors"]
    ok = errors == 0 and others["p95_ms"] < P95_TARGET_MS and up["requests"] > 0
    print(f"load: {'PASS' if ok else 'FAIL'} ({errors} errors, target 0; p95 of the others {others['p95_ms']:.0f} ms, "
          f"target < {P95_TARGET_MS:.0f} ms; {up['requests']} uploads of maximum size)", flush=True)
    return {"others": others, "uploads": up, "pass": ok}


def import_outcomes(fleets: list[int]) -> dict[str, int]:
    from django.db import connection
    from django.db.models import Count

    from planning.models import CalibrationUpload

    connection.close()
    rows = CalibrationUpload.objects.filter(fleet_id__in=fleets).values("status").annotate(n=Count("id"))
    return {r["status"]: r["n"] for r in rows}


def scratch_env(args: argparse.Namespace) -> tuple[dict[str, str], Path]:
    """The benchmark's environment: a scratch PostgreSQL database + Redis db (full) or a temporary var dir (embedded)."""
    var = Path(tempfile.mkdtemp(prefix="fp-bench-load-"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")}
    env.update(DJANGO_SETTINGS_MODULE="planner.settings", DJANGO_ENV="development", DEBUG="0", LOG_LEVEL="WARNING",
               FP_VAR_DIR=str(var), PYTHONPATH=str(ROOT), ALLOWED_HOSTS="127.0.0.1,localhost",
               CELERY_TASK_ALWAYS_EAGER="0")
    if args.mode == "full":
        env.update(DATABASE_URL=f"{args.pg}/{args.db}", REDIS_URL=args.redis)
    for key in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        os.environ.pop(key, None)
    os.environ.update(env)
    return env, var


def main() -> int:
    args = parse_args()
    env, var = scratch_env(args)
    if args.mode == "full":
        recreate_database(args.pg, args.db)
    gunicorn = worker = None
    try:
        t0 = time.monotonic()
        seeded = seed()
        uploads = upload_requests(seeded["upload_fleets"])
        what = (f"full mode: PostgreSQL {args.pg.split('@')[-1]}/{args.db}, Redis {args.redis}" if args.mode == "full"
                else f"embedded mode: SQLite and the SQLite broker in {var}")
        print(f"{what}; seeded in {time.monotonic() - t0:.1f} s; {os.cpu_count()} CPUs", flush=True)
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "planner.wsgi:application", "--workers", str(args.workers),
             "--bind", f"127.0.0.1:{args.port}", "--log-level", "warning", "--timeout", "30"],
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
            "GET /api/v1/calibration-files/": [{"method": "GET", "path": "/api/v1/calibration-files/"}],
        }
        mixed = list(itertools.chain.from_iterable(phases.values()))
        # warm up every gunicorn worker (imports, DB connections)
        loadgen({"base": base, "headers": headers, "requests": mixed}, 3, args.workers * 2)
        results: dict[str, Any] = {}
        for name, reqs in phases.items():
            results[name] = loadgen({"base": base, "headers": headers, "requests": reqs}, args.phase_duration,
                                    args.concurrency)
            r = results[name]
            print(f"{name:45s} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:7.1f}  p95 {r['p95_ms']:7.1f}  "
                  f"p99 {r['p99_ms']:7.1f} ms  errors {r['errors']}", flush=True)
        worker, worker_log = start_worker(env, "imports")
        print(f"\nload: {args.concurrency} clients on all of the above for {args.load_seconds:.0f} s + "
              f"{args.upload_clients} clients uploading {len(uploads[0]['content']) / 2**20:.1f} MiB step logs "
              f"(gunicorn {args.workers} workers, 1 celery worker importing)", flush=True)
        load = load_with_uploads(args, base, headers, mixed, uploads)
        stop(worker)
        worker = None
        worker_log.close()
        load["imports"] = import_outcomes(seeded["upload_fleets"])
        print(f"import jobs of the uploads by status: {load['imports']}", flush=True)
        results["load"] = load
        throughput = run_throughput(args, env, base, seeded["token"], seeded["scenario_ids"])
        print(f"run throughput: {throughput['runs_per_min_per_worker']} {throughput['kind']} runs/min per worker "
              f"({throughput['succeeded']}/{throughput['runs']} succeeded, queue drained in {throughput['drain_s']} s; "
              f"median execution {throughput['exec_median_s']} s)", flush=True)
        summary = {"mode": args.mode, "workers": args.workers, "concurrency": args.concurrency,
                   "upload_clients": args.upload_clients, "load_seconds": args.load_seconds, "cpus": os.cpu_count(),
                   "phases": results, "throughput": throughput}
        print(json.dumps(summary))
        return 0 if load["pass"] and throughput["failed"] == 0 else 1
    finally:
        stop(worker)
        stop(gunicorn)
        from django.db import connections

        connections.close_all()
        if args.mode == "full" and not args.keep:
            drop_database(args.pg, args.db)
        if not args.keep:
            shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
