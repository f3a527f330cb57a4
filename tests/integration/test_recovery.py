"""Recovery with heartbeat leases (issue #23), on PostgreSQL, Redis, real ``celery worker`` and ``celery beat``.

Every run kind is in flight — predict, search and tco sweep children, a capacity plan, a fabric study — when

* the worker running them is SIGKILLed: each run is re-claimed once its lease lapses (beat's reaper, every
  ``FP_REAPER_EVERY_S``) and finishes exactly once on a new worker, with the **shipped** settings (lease 30 s,
  heartbeat 10 s, reaper every 15 s); before the kill, runs that never reach an engine checkpoint keep their lease
  for longer than the lease from their heartbeat thread alone, and nothing re-claims them;
* the broker is flushed (Redis ``FLUSHDB``: queued messages, unacked entries and the queues' bindings gone): the
  running run finishes, beat's reaper re-sends the lost runs once a worker re-declared the queues, and each
  finishes exactly once.

Recovery is read off the runs' own events (``RunEvent``): from the kill (or flush) to the run's next claim. Both
tests print a table of it per run kind and assert every figure is under 90 s. Redis db and PostgreSQL database are
the test's own (REDIS_URL / DATABASE_URL); the flush empties only that Redis db.
"""

from __future__ import annotations

import copy
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.integration._waiting import wait_for
from tests.security.seed import CLUSTER, MODEL, PARALLELISM, TRAINING

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(420)]

PLAN: dict[str, Any] = {
    "horizon_days": 60, "failures": False, "replications": 2, "policy": "fifo",
    "clusters": [{"name": "main", "gpu": "H100-SXM", "gpus": 32}],
    "jobs": [{"name": "big", "gpus": 16, "duration_days": 10, "submit_day": 5, "deadline_day": 40}],
    "arrivals": [{"name": "research", "rate_per_day": 2.0, "gpus": 8, "duration_days": 1.0}],
}
CLAIMED = re.compile(r"simulations\.execute_run\[[^\]]+\] succeeded in [^:]+: \{'run': (\d+), 'claimed': True")
LIMIT_S = 90.0




@pytest.fixture
def mix(make_user: Callable[..., Any]) -> dict[str, Any]:
    from planning import services as planning
    from planning.services.capacity_plans import capacity_plan_create

    planning.catalog_load_default()
    user = make_user("planner")
    team = user.test_team
    workload = planning.workload_create(team=team, user=user, name="GPT-1.7B", model=copy.deepcopy(MODEL),
                                        training=copy.deepcopy(TRAINING), parallelism=copy.deepcopy(PARALLELISM))
    scenario = planning.scenario_create(team=team, user=user, name="recovery", workload=workload,
                                        cluster=copy.deepcopy(CLUSTER))
    plan = capacity_plan_create(team=team, user=user, name="recovery plan", document=copy.deepcopy(PLAN))
    return {"user": user, "team": team, "scenario": scenario, "plan": plan}


def _submit(mix: dict[str, Any], predict_children: int = 2) -> dict[int, str]:
    """One run of every kind in flight: run id -> what it is."""
    from simulations import services
    from simulations.services.capacity_plans import capacity_plan_submit

    what: dict[int, str] = {}
    speeds = [100, 200, 400, 800]
    for kind, n in (("predict", predict_children), ("search", 2), ("tco", 2)):
        sweep = services.sweep_submit(scenario=mix["scenario"], user=mix["user"], kind=kind,
                                      axes={"cluster.nic_gbps": speeds[:n]})
        what.update(dict.fromkeys(sweep.runs.values_list("pk", flat=True), f"{kind} sweep child"))
    plan_run = capacity_plan_submit(plan=mix["plan"], user=mix["user"], params={"replications": 2}, force=True)
    what[plan_run.pk] = "capacity plan"
    study = services.run_submit(scenario=mix["scenario"], user=mix["user"], kind="fabric", force=True,
                                params={"seeds": 2, "ranks": 32})
    what[study.pk] = "fabric study"
    return what


class Beat:
    """A real ``celery beat`` (DatabaseScheduler) running the seeded schedules: the reaper every FP_REAPER_EVERY_S."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        from tests.conftest import ROOT

        self.log = tmp / "beat.log"
        cmd = [sys.executable, "-m", "celery", "-A", "planner", "beat", "-l", "INFO",
               "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler",
               "--pidfile", str(tmp / "beat.pid"), "-s", str(tmp / "beat.db")]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture
def beat(tmp_path: Path, settings: Any) -> Iterator[Callable[..., Beat]]:
    from tests.conftest import _worker_env

    started: list[Beat] = []

    def start(reaper_every_s: int | None = None, **env: str) -> Beat:
        if reaper_every_s is not None:
            settings.FP_REAPER_EVERY_S = reaper_every_s
        call_command("seed_schedules", stdout=open(os.devnull, "w"))  # noqa: SIM115
        b = Beat(tmp_path, {**_worker_env(), **env})
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


def _events(ids: list[int]) -> dict[int, list[Any]]:
    from simulations.models import RunEvent

    out: dict[int, list[Any]] = {i: [] for i in ids}
    for e in RunEvent.objects.filter(run_id__in=ids).order_by("at", "pk"):
        out[e.run_id].append(e)
    return out


def _report(title: str, rows: list[tuple[str, int, float]]) -> str:
    lines = [title, f"{'run kind':22s} {'run':>6s} {'recovery s':>11s}"]
    lines += [f"{kind:22s} {pk:6d} {secs:11.1f}" for kind, pk, secs in sorted(rows)]
    text = "\n".join(lines)
    print("\n" + text)
    return text


def _finished_once(ids: list[int], what: dict[int, str], *workers: Any) -> None:
    from simulations.models import SimulationRun

    runs = {r.pk: r for r in SimulationRun.objects.filter(pk__in=ids)}
    bad = {pk: (what[pk], r.status, r.error) for pk, r in runs.items() if r.status != "succeeded" or not r.result}
    assert not bad, bad
    events = _events(ids)
    finished = {pk: sum(e.kind == "finished" for e in ev) for pk, ev in events.items()}
    assert finished == dict.fromkeys(ids, 1), finished
    claimed: dict[int, int] = {}
    for w in workers:
        for pk in CLAIMED.findall(w.output()):
            claimed[int(pk)] = claimed.get(int(pk), 0) + 1
    assert {pk: claimed.get(pk, 0) for pk in ids} == dict.fromkeys(ids, 1), claimed


# --- 1. the worker SIGKILLed mid-sweep, shipped settings -----------------------------------------------------------
def test_sigkill_mid_sweep_every_kind_reclaimed_within_90_s(mix, celery_worker_factory, beat, purge_broker) -> None:
    from django.conf import settings

    from simulations import limits
    from simulations.models import SimulationRun

    assert (limits.run_lease_s(), limits.run_heartbeat_s(), settings.FP_REAPER_EVERY_S) == (30, 10, 15), \
        "this test measures the shipped settings"
    housekeeping = celery_worker_factory(queues="default", concurrency=1, wait=False)  # runs beat's reaper
    beat()
    # 8 runs at once; their engine call never reaches a checkpoint: only the heartbeat thread renews their lease
    first = celery_worker_factory(queues="simulations", concurrency=8,
                                  extra_env={"FP_TASK_TEST_DELAY_S": "600", "FP_TASK_TEST_NO_CHECKPOINT": "1"})
    what = _submit(mix)
    ids = sorted(what)
    assert len(ids) == 8 and set(what.values()) == {"predict sweep child", "search sweep child", "tco sweep child",
                                                    "capacity plan", "fabric study"}
    wait_for(lambda: SimulationRun.objects.filter(pk__in=ids, status="running",
                                               progress_message__startswith="running").count() == 8,
          120, "all 8 runs to be mid-engine on the first worker")
    tokens = dict(SimulationRun.objects.filter(pk__in=ids).values_list("pk", "claim_token"))

    # Alive for longer than the lease, beat's reaper passing twice: nobody may take a live run over.
    time.sleep(limits.run_lease_s() + 12)
    runs = list(SimulationRun.objects.filter(pk__in=ids))
    assert all(r.status == "running" and r.attempts == 1 and r.claim_token == tokens[r.pk] for r in runs), \
        [(r.pk, r.status, r.attempts) for r in runs]
    assert not any(e.kind in ("lease-lapsed", "lost") for ev in _events(ids).values() for e in ev)
    assert "simulations.reap_stuck_runs" in housekeeping.output(), "beat's reaper ran meanwhile"

    first.kill(signal.SIGKILL)  # no ack, no cleanup; the heartbeat threads die with it
    killed_at = timezone.now()
    second = celery_worker_factory(queues="simulations", concurrency=4, extra_env={"FP_TASK_TEST_DELAY_S": "0.2"})
    wait_for(lambda: all(r.is_terminal for r in SimulationRun.objects.filter(pk__in=ids)), 180,
          "every run to be re-claimed and finish", every=1)

    rows = []
    for pk, ev in _events(ids).items():
        claims = [e for e in ev if e.kind == "claimed"]
        assert [c.attempt for c in claims] == [1, 2], (what[pk], [(e.kind, e.attempt, e.message) for e in ev])
        assert any(e.kind == "lease-lapsed" and e.worker == "reaper" for e in ev), [e.kind for e in ev]
        rows.append((what[pk], pk, (claims[1].at - killed_at).total_seconds()))
    text = _report(f"SIGKILL -> re-claim (lease {limits.run_lease_s():g} s, heartbeat {limits.run_heartbeat_s():g} s, "
                   f"reaper every {settings.FP_REAPER_EVERY_S} s)", rows)
    assert all(0 < secs < LIMIT_S for _, _, secs in rows), text
    _finished_once(ids, what, first, second)


# --- 2. the broker flushed mid-sweep -------------------------------------------------------------------------------
def _redis_db() -> str:
    from django.conf import settings

    tail = settings.REDIS_URL.rstrip("/").rsplit("/", 1)[-1]
    return tail if tail.isdigit() else "0"


def _redis(*args: str) -> str:
    from django.conf import settings

    host = re.sub(r"^redis://([^:/]+).*$", r"\1", settings.REDIS_URL) or "127.0.0.1"
    out = subprocess.run(["redis-cli", "-h", host, "-n", _redis_db(), *args], capture_output=True, text=True,
                         timeout=20, check=True)
    return out.stdout.strip()


def test_broker_flushdb_mid_sweep_every_kind_resent_and_finished_once(mix, celery_worker_factory, beat,
                                                                      purge_broker) -> None:
    from simulations.models import SimulationRun, Sweep

    # Short settings to keep the test short: queued runs count as possibly lost after 12 s, beat's reaper and the
    # workers' re-declaration of the queues every 4 s.
    fast = {"FP_RUN_REDISPATCH_AFTER_S": "12", "FP_REAPER_EVERY_S": "4"}
    beat(reaper_every_s=4, **fast)
    worker = celery_worker_factory(queues="default,simulations", concurrency=3,
                                   extra_env={**fast, "FP_TASK_TEST_DELAY_S": "5"})
    what = _submit(mix, predict_children=4)
    ids = sorted(what)
    assert len(ids) == 10
    wait_for(lambda: SimulationRun.objects.filter(pk__in=ids, status="running").count() >= 2, 60, "runs to start")
    _redis("flushdb")  # queued messages, unacked entries, the queues' bindings, chord counters: all gone
    flushed_at = timezone.now()
    assert _redis("llen", "simulations") == "0"
    lost = list(SimulationRun.objects.filter(pk__in=ids, status="queued").values_list("pk", flat=True))
    assert len(lost) >= 4, "the test needs runs that were only in the flushed queue"

    wait_for(lambda: all(r.is_terminal for r in SimulationRun.objects.filter(pk__in=ids)), 240,
          "every run to finish after the flush", every=1)
    assert _redis("exists", "_kombu.binding.simulations") == "1", "a worker re-declared the queues"

    events = _events(ids)
    rows = []
    for pk in lost:
        ev = events[pk]
        assert any(e.kind == "redispatched" and e.worker == "reaper" for e in ev), [(e.kind, e.message) for e in ev]
        claims = [e for e in ev if e.kind == "claimed"]
        assert len(claims) == 1, (what[pk], [(e.kind, e.attempt) for e in ev])
        rows.append((what[pk], pk, (claims[0].at - flushed_at).total_seconds()))
    text = _report("FLUSHDB -> claim of each lost run (re-sent by beat's reaper; redispatch after 12 s, reaper every 4 s)",
                   rows)
    assert all(0 < secs < LIMIT_S for _, _, secs in rows), text
    _finished_once(ids, what, worker)
    sweeps = Sweep.objects.filter(runs__pk__in=ids).distinct()
    wait_for(lambda: all(s.status == "succeeded" for s in Sweep.objects.filter(pk__in=[s.pk for s in sweeps])), 30,
          "the sweeps to close (their chords' counters were flushed: the last child closes each)")
