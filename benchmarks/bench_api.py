"""API latency figures: the compare report over 10 runs, the live preview, and POST → stored result.

Run from the repository root: ``python benchmarks/bench_api.py``.

* Creates its own throw-away database with Django's test utilities (PostgreSQL when DATABASE_URL is set,
  otherwise a temporary SQLite file), seeds the default catalog, a team, a scenario and 10 finished TCO
  runs (real engine), then times ``GET /api/v1/reports/compare?runs=…`` and ``POST /api/v1/preview/``.
* With REDIS_URL and DATABASE_URL set it also starts one ``celery worker`` subprocess and times
  POST ``/api/v1/scenarios/{id}/run/`` → result stored in the database (polling every 10 ms).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import copy
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner.settings")
os.environ.setdefault("LOG_LEVEL", "ERROR")
if not os.environ.get("DATABASE_URL"):
    os.environ["FP_VAR_DIR"] = tempfile.mkdtemp(prefix="fp-bench-")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

MODEL = {"name": "GPT-1.7B", "layers": 24, "hidden": 2304, "heads": 24, "kv_heads": 24, "ffn_hidden": 9216,
         "gated_ffn": False, "vocab": 51200, "seq_len": 2048}
TRAINING = {"global_batch": 512, "micro_batch": 1, "precision": "bf16", "recompute": "full", "tokens": 3.0e11,
            "zero": 0}
CLUSTER = {"gpu": "A100-80GB", "gpus": 32, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 200,
           "fabric": "infiniband", "topology": "fat-tree", "oversubscription": 1.0}


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"median {statistics.median(values) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms (n={len(values)})"


def seed() -> dict[str, Any]:
    from accounts.models import Membership, Team, User
    from planning import services as planning
    from simulations import services

    planning.catalog_load_default()
    user = User.objects.create_user(username="bench", password=uuid.uuid4().hex)
    team = Team.objects.create(name="Bench", slug="bench")
    Membership.objects.create(user=user, team=team, role="planner")
    workload = planning.workload_create(team=team, user=user, name="GPT-1.7B", model=copy.deepcopy(MODEL),
                                        training=copy.deepcopy(TRAINING), parallelism="auto")
    scenario = planning.scenario_create(team=team, user=user, name="bench", workload=workload,
                                        cluster=copy.deepcopy(CLUSTER))
    doc, version, values = planning.scenario_resolve(scenario=scenario)
    runs = []
    for gpus in (32, 64, 128, 256, 512):
        for nic in (200, 400):
            d = copy.deepcopy(doc)
            d["cluster"].update(gpus=gpus, nic_gbps=nic)
            run = services.run_create(team=team, user=user, kind="tco", document=d, version=version, values=values,
                                      scenario=scenario, label=f"{gpus} GPUs {nic}G")
            services.run_execute(run_id=run.pk)
            runs.append(run.pk)
    return {"user": user, "team": team, "scenario": scenario, "runs": runs, "doc": doc}


def bench_compare(world: dict[str, Any]) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(world["user"])
    ids = ",".join(map(str, world["runs"]))
    url = f"/api/v1/reports/compare?runs={ids}&baseline={world['runs'][0]}"
    assert client.get(url).status_code == 200
    times = []
    for _ in range(50):
        t0 = time.perf_counter()
        r = client.get(url)
        times.append(time.perf_counter() - t0)
        assert r.status_code == 200
    print(f"compare report, 10 runs ({len(r.json()['rows'])} metric rows): {ms(times)}")
    times = []
    for fmt in ("csv", "xlsx"):
        t0 = time.perf_counter()
        assert client.get(url + f"&fmt={fmt}").status_code == 200
        times.append(time.perf_counter() - t0)
    print(f"compare export csv {times[0] * 1000:.1f} ms, xlsx {times[1] * 1000:.1f} ms")

    times, server = [], []
    body = {"document": world["doc"]}
    client.post("/api/v1/preview/", body, format="json")
    for _ in range(30):
        t0 = time.perf_counter()
        r = client.post("/api/v1/preview/", body, format="json")
        times.append(time.perf_counter() - t0)
        server.append(r.json()["server_time_ms"] / 1000)
    print(f"preview (predict + tco, client round trip): {ms(times)}; engine time {ms(server)}")


def bench_end_to_end(world: dict[str, Any]) -> None:
    from rest_framework.test import APIClient

    from simulations.models import SimulationRun

    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env["DATABASE_URL"] = (f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:"
                           f"{db.get('PORT') or 5432}/{db['NAME']}")
    env["LOG_LEVEL"] = "WARNING"
    log = Path(tempfile.mkdtemp(prefix="fp-bench-worker-")) / "worker.log"
    cmd = [sys.executable, "-m", "celery", "-A", "planner", "worker", "-Q", "default,simulations", "-c", "1",
           "-n", f"bench-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]
    from planner.celery import app

    app.control.purge()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "ready." not in (log.read_text(errors="replace") if log.exists() else ""):
            if time.monotonic() > deadline or proc.poll() is not None:
                print("worker did not start:\n" + log.read_text(errors="replace")[-2000:])
                return
            time.sleep(0.1)
        client = APIClient()
        client.force_authenticate(world["user"])
        times = []
        for i in range(11):
            t0 = time.perf_counter()
            r = client.post(f"/api/v1/scenarios/{world['scenario'].pk}/run/", {"kind": "tco", "force": True},
                            format="json")
            assert r.status_code == 202, r.content
            run_id = r.json()["id"]
            while not SimulationRun.objects.filter(pk=run_id, status__in=("succeeded", "failed")).exists():
                if time.perf_counter() - t0 > 60:
                    raise RuntimeError("run did not finish in 60 s")
                time.sleep(0.01)
            if i:  # the first run warms the worker's imports
                times.append(time.perf_counter() - t0)
        print(f"end to end, POST run -> result stored (1 worker, TCO): {ms(times)}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def main() -> int:
    setup_test_environment()
    settings.DATABASES["default"].setdefault("TEST", {})
    if os.environ.get("DATABASE_URL"):
        settings.DATABASES["default"]["TEST"]["NAME"] = f"fp_bench_{os.getpid()}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        t0 = time.perf_counter()
        world = seed()
        print(f"database: {connection.vendor}; seeded 10 TCO runs in {time.perf_counter() - t0:.1f} s")
        bench_compare(world)
        if os.environ.get("REDIS_URL") and os.environ.get("DATABASE_URL"):
            bench_end_to_end(world)
        else:
            print("end to end: skipped (needs DATABASE_URL and REDIS_URL for a worker subprocess)")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
