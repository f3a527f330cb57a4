"""Fault injection against real PostgreSQL, Redis and ``celery worker`` processes.

Each test breaks one piece of infrastructure in the middle of real work and then checks the invariant
the run protocol promises (simulations/services.py): every run ends in exactly one terminal state, its
result written by exactly one execution, and no run row is duplicated.

* a worker SIGKILLed mid-run → the run completes exactly once on another worker;
* Redis restarted (queues flushed) with runs queued → the reaper re-queues them from the database;
* the worker's PostgreSQL connection terminated mid-run → the task retries, the run ends consistent;
* the re-evaluation beat task fired twice concurrently → each change is re-evaluated once.

FP_TASK_TEST_DELAY_S makes a run take that long (the worker runs tests/slow_worker.py: the engine call
waits, heartbeating through the engine's checkpoint()), so there is time to break things.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections

from tests.integration._waiting import wait_for
from tests.security.seed import CLUSTER, MODEL, PARALLELISM, TRAINING

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

REDIS_HOST = "127.0.0.1"
REDIS_START = [
    "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379", "--save", "",
    "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log",
]
CLAIMED = re.compile(r"simulations\.execute_run\[[^\]]+\] succeeded in [^:]+: \{'run': (\d+), 'claimed': True")


# --- helpers ----------------------------------------------------------------------------------------------


def _runs(ids: list[int]) -> list[Any]:
    from simulations.models import SimulationRun

    return list(SimulationRun.objects.filter(pk__in=ids).order_by("pk"))


def _all_terminal(ids: list[int]) -> bool:
    return all(r.is_terminal for r in _runs(ids))


def _claimed_executions(*workers: Any) -> dict[int, int]:
    """run id -> number of executions that claimed it and finished (from the worker logs)."""
    counts: dict[int, int] = {}
    for w in workers:
        for run_id in CLAIMED.findall(w.output()):
            counts[int(run_id)] = counts.get(int(run_id), 0) + 1
    return counts


@pytest.fixture
def world(db: Any) -> dict[str, Any]:
    from accounts.models import Membership, Team, User
    from planning import services as planning

    planning.catalog_load_default()
    team = Team.objects.create(name="Faults", slug="faults")
    user = User.objects.create_user(username="faulty", password="x")
    Membership.objects.create(user=user, team=team, role="admin")
    workload = planning.workload_create(team=team, user=user, name="GPT-1.7B", model=dict(MODEL),
                                        training=dict(TRAINING), parallelism=dict(PARALLELISM))
    scenarios = [
        planning.scenario_create(team=team, user=user, name=f"s{i}", workload=workload,
                                 cluster={**CLUSTER, "nic_gbps": 200 + 100 * i})
        for i in range(4)
    ]
    return {"team": team, "user": user, "workload": workload, "scenarios": scenarios}


def _submit(world: dict[str, Any], n: int = 1) -> list[int]:
    from simulations import services

    return [services.run_submit(scenario=s, user=world["user"], kind="predict", force=True).pk
            for s in world["scenarios"][:n]]


def _redis(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["redis-cli", "-h", REDIS_HOST, *args], capture_output=True, text=True, timeout=20)


def _redis_db() -> str:
    from django.conf import settings

    tail = settings.REDIS_URL.rstrip("/").rsplit("/", 1)[-1]
    return tail if tail.isdigit() else "0"


def _redis_up() -> bool:
    try:
        return _redis("ping").stdout.strip() == "PONG"
    except (subprocess.TimeoutExpired, OSError):
        return False


@pytest.fixture
def restore_redis() -> Iterator[None]:
    """Whatever happens in the test, Redis is running again afterwards."""
    yield
    if not _redis_up():
        subprocess.run(REDIS_START, check=False, timeout=30)
        wait_for(_redis_up, 30, "redis to come back")


def _restart_redis() -> None:
    _redis("shutdown", "nosave")
    wait_for(lambda: not _redis_up(), 15, "redis to stop")
    subprocess.run(REDIS_START, check=True, timeout=30)
    wait_for(_redis_up, 30, "redis to start")


def _reset_producer_pool() -> None:
    """The test process's own broker connections died with Redis; drop them so sends reconnect."""
    from kombu import pools

    from planner.celery import app

    pools.reset()  # closes and forgets every pooled connection/producer
    app._pool = None
    app.amqp._producer_pool = None


# --- 1. worker SIGKILLed mid-run -------------------------------------------------------------------------
def test_worker_killed_mid_run_completes_exactly_once_on_another_worker(
    world, celery_worker_factory, purge_broker
) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    # A short lease (heartbeat every 2 s) so the test is quick; the reaper below uses the same lease.
    lease = {"FP_RUN_LEASE_S": "6", "FP_RUN_HEARTBEAT_S": "2"}
    first = celery_worker_factory(queues="simulations", extra_env={**lease, "FP_TASK_TEST_DELAY_S": "60"})
    [run_id] = _submit(world)
    wait_for(lambda: SimulationRun.objects.filter(pk=run_id, status="running", progress_message__startswith="running").exists(),
          60, "the first worker to be mid-run")
    first.kill()  # SIGKILL to the whole process group: no ack, no cleanup, heartbeat stops
    run = SimulationRun.objects.get(pk=run_id)
    assert run.status == "running" and run.attempts == 1 and run.result is None

    # A new worker; its broker visibility timeout is short so the unacked message comes back, and the
    # reaper (as beat would call it) re-queues the run once its lease expired. Either path may deliver,
    # possibly both: the compare-and-set claim must turn that into a single execution.
    second = celery_worker_factory(
        queues="simulations",
        extra_env={**lease, "FP_TASK_TEST_DELAY_S": "1", "CELERY_VISIBILITY_TIMEOUT": "2"},
    )
    wait_for(lambda: _all_terminal([run_id]), 120, "the run to finish on the second worker", every=1,
          on_tick=lambda: services.run_reap(lease_s=6, redispatch_after_s=3))
    time.sleep(3)  # let any duplicate delivery arrive and be refused

    run = SimulationRun.objects.get(pk=run_id)
    assert run.status == "succeeded", (run.status, run.error)
    assert run.result and "step_time_s" in run.result
    assert run.attempts == 2, "claimed once by the killed worker and once by the second"
    assert _claimed_executions(first, second) == {run_id: 1}, second.output()[-3000:]
    assert SimulationRun.objects.filter(scenario=world["scenarios"][0]).count() == 1


# --- 2. Redis restarted with runs queued ----------------------------------------------------------------
def test_redis_restart_loses_queue_reaper_requeues_from_database(
    world, celery_worker_factory, purge_broker, restore_redis
) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    worker = celery_worker_factory(queues="simulations", extra_env={"FP_TASK_TEST_DELAY_S": "3"})
    ids = _submit(world, n=4)
    wait_for(lambda: SimulationRun.objects.filter(pk__in=ids, status="running").exists(), 60, "a run to start")

    _restart_redis()  # no persistence: every queued message is gone
    assert _redis("-n", _redis_db(), "llen", "simulations").stdout.strip() == "0"
    _reset_producer_pool()
    queued = SimulationRun.objects.filter(pk__in=ids, status="queued").count()
    assert queued >= 2, "the test needs runs that were only in the (now flushed) queue"

    # Nothing would ever run them again without the reaper: the database is the source of truth.
    wait_for(lambda: _all_terminal(ids), 180, "every run to finish after re-queueing", every=2,
          on_tick=lambda: services.run_reap(stuck_after_s=4))
    time.sleep(2)

    runs = _runs(ids)
    assert [r.status for r in runs] == ["succeeded"] * 4, [(r.pk, r.status, r.error) for r in runs]
    assert all(r.result for r in runs)
    assert all(r.attempts == 1 for r in runs), [(r.pk, r.attempts) for r in runs]
    assert SimulationRun.objects.filter(team=world["team"]).count() == 4, "no run row duplicated"
    executions = _claimed_executions(worker)
    assert all(executions.get(i, 0) <= 1 for i in ids), executions
    assert worker.proc.poll() is None, "the worker survives a broker restart (reconnects)"


# --- 3. PostgreSQL connection terminated mid-run --------------------------------------------------------
def _terminate_other_backends() -> int:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cur.fetchone()[0])


def test_database_connection_dropped_mid_run_retries_and_ends_consistent(
    world, celery_worker_factory, purge_broker
) -> None:
    from simulations.models import SimulationRun

    # Production lease (30 s) and no reaper: recovery must come from the task's own retry.
    worker = celery_worker_factory(queues="simulations", extra_env={"FP_TASK_TEST_DELAY_S": "4"})
    [run_id] = _submit(world)
    wait_for(lambda: SimulationRun.objects.filter(pk=run_id, status="running", progress_message__startswith="running").exists(),
          60, "the run to be mid-flight")
    assert _terminate_other_backends() >= 1, "the worker holds a database connection"

    wait_for(lambda: _all_terminal([run_id]), 90, "the run to finish after the retry", every=0.5)
    run = SimulationRun.objects.get(pk=run_id)
    assert run.status == "succeeded", (run.status, run.error, worker.output()[-3000:])
    assert run.result and "step_time_s" in run.result
    assert run.attempts == 2, "the interrupted execution plus exactly one retry"
    assert "Retry in" in worker.output() or "retry" in worker.output().lower()
    assert _claimed_executions(worker) == {run_id: 1}
    assert worker.proc.poll() is None


# --- 4. the re-evaluation beat fired twice --------------------------------------------------------------
@pytest.fixture
def watched_change(world) -> Any:
    """A watched scenario evaluated once, whose catalog then gets a new version (so it needs a re-run)."""
    from planning import services as planning
    from simulations import services

    scenario = world["scenarios"][0]
    fork = planning.catalog_fork(catalog=planning.catalog_default(), team=world["team"], user=world["user"])
    planning.scenario_update(scenario=scenario, user=world["user"], catalog=fork, watched=True)
    run = services.run_submit(scenario=scenario, user=world["user"], kind="predict", force=True)
    services.run_execute(run_id=run.pk)  # evaluated in-process: no worker needed for the baseline
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    item = fork.latest_version().items.filter(kind="gpu").order_by("key").first()
    planning.catalog_item_update(item=item, user=world["user"],
                                 data={"unit_price_usd": (item.unit_price_usd or 1000) * 1.25})
    needed, reasons, _ = services.scenario_needs_reevaluation(scenario=scenario)
    assert needed, reasons
    return scenario


def test_reevaluation_task_fired_twice_concurrently_runs_once(
    watched_change, celery_worker_factory, purge_broker
) -> None:
    from simulations import tasks
    from simulations.models import ReEvaluation, SimulationRun

    # Two beat instances enqueue the same tick; two workers pick the copies up at the same moment.
    for _ in range(2):
        celery_worker_factory(queues="default,simulations", extra_env={"FP_TASK_TEST_DELAY_S": "0.5"})
    results = [tasks.reevaluate_watched.apply_async(queue="default") for _ in range(2)]
    outcomes = [r.get(timeout=120) for r in results]

    reevals = ReEvaluation.objects.filter(scenario=watched_change)
    assert reevals.count() == 1, outcomes
    wait_for(lambda: ReEvaluation.objects.filter(scenario=watched_change, completed_at__isnull=False).exists(),
          120, "the re-evaluation run to complete")
    runs = SimulationRun.objects.filter(scenario=watched_change, trigger="reevaluation")
    assert runs.count() == 1 and runs.get().status == "succeeded"
    assert "price" in reevals.get().summary or reevals.get().reasons, reevals.get().summary

    # A later tick with nothing changed is a no-op.
    assert tasks.reevaluate_watched.apply_async(queue="default").get(timeout=60) == {"reevaluations": []}
    assert ReEvaluation.objects.filter(scenario=watched_change).count() == 1


def test_reevaluation_service_race_without_the_lock_still_runs_once(watched_change, purge_broker) -> None:
    """Bypass the cache lock: two passes racing in two DB connections; the unique key decides."""
    from simulations import services
    from simulations.models import ReEvaluation, SimulationRun

    barrier = threading.Barrier(2)
    created: list[int] = []
    errors: list[BaseException] = []

    def one_pass() -> None:
        try:
            barrier.wait(timeout=30)
            created.extend(r.pk for r in services.reevaluate_watched(scenario_ids=[watched_change.pk]))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(created) == 1
    assert ReEvaluation.objects.filter(scenario=watched_change).count() == 1
    assert SimulationRun.objects.filter(scenario=watched_change, trigger="reevaluation").count() == 1


def test_two_real_beat_processes_reevaluate_once(watched_change, celery_worker_factory, purge_broker,
                                                 tmp_path) -> None:
    """Two ``celery beat`` processes (DatabaseScheduler) both fire the re-evaluation schedule; one happens."""
    import os
    import signal
    import sys

    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from simulations.models import ReEvaluation, SimulationRun
    from tests.conftest import ROOT, _worker_env

    every, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.update_or_create(
        name="test: re-evaluate every second",
        defaults={"task": "simulations.reevaluate_watched", "interval": every, "queue": "default", "enabled": True},
    )
    celery_worker_factory(queues="default,simulations")
    beats = []
    for i in range(2):
        log = tmp_path / f"beat-{i}.log"
        cmd = [sys.executable, "-m", "celery", "-A", "planner", "beat", "-l", "INFO",
               "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler",
               "--pidfile", str(tmp_path / f"beat-{i}.pid"), "-s", str(tmp_path / f"beat-{i}.db")]
        beats.append((subprocess.Popen(cmd, cwd=ROOT, env=_worker_env(), stdout=log.open("wb"),
                                       stderr=subprocess.STDOUT, start_new_session=True), log))
    try:
        def sent_by_both() -> bool:
            return all(log.read_text(errors="replace").count("simulations.reevaluate_watched") >= 2
                       for _, log in beats)

        wait_for(sent_by_both, 90, "both beats to send the re-evaluation task at least twice")
        wait_for(lambda: ReEvaluation.objects.filter(scenario=watched_change, completed_at__isnull=False).exists(),
              120, "the re-evaluation run to complete")
        time.sleep(3)  # further ticks from both beats keep arriving: none may add a second re-evaluation
    finally:
        for proc, _ in beats:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        PeriodicTask.objects.filter(name="test: re-evaluate every second").delete()
    assert ReEvaluation.objects.filter(scenario=watched_change).count() == 1
    runs = SimulationRun.objects.filter(scenario=watched_change, trigger="reevaluation")
    assert runs.count() == 1 and runs.get().status == "succeeded"
