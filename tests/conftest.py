"""Shared fixtures: users in teams with roles, API clients, and a real Celery worker process.

Integration tests (marker ``integration``) need PostgreSQL + Redis (DATABASE_URL / REDIS_URL). Without
them they skip — unless FP_REQUIRE_INTEGRATION=1 (set by .ci/run), where a missing service is a failure.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parent.parent
FULL_MODE = bool(os.environ.get("DATABASE_URL")) and bool(os.environ.get("REDIS_URL"))
REQUIRE_INTEGRATION = os.environ.get("FP_REQUIRE_INTEGRATION") == "1"

# Property tests (Hypothesis) are derandomized in `make test` and CI: the same examples every run, so a red
# build is the code's doing, not the draw's. `make fuzz` (scripts/fuzz.sh) loads "fuzz": fresh random examples.
hypothesis_settings.register_profile("ci", derandomize=True)
hypothesis_settings.register_profile("fuzz", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The web engine budget (FP_WEB_ENGINE_BUDGET_S, 5 s as shipped) bounds each request's engine work. A test that only
# passes through a request must not fail because a loaded machine took 5 s, so tests run with a generous budget:
# FP_TEST_WEB_ENGINE_BUDGET_S, by default the most the start-up check allows (half of FP_WEB_TIMEOUT_S: 15 s); a larger
# value raises the web timeout with it. Tests of the budget itself set their own (tests/security/test_budgets.py).
def _generous_web_budget() -> None:
    budget = float(os.environ.get("FP_TEST_WEB_ENGINE_BUDGET_S") or settings.FP_WEB_TIMEOUT_S / 2)
    settings.FP_WEB_TIMEOUT_S = max(settings.FP_WEB_TIMEOUT_S, 2 * budget)
    settings.FP_WEB_ENGINE_BUDGET_S = budget


_generous_web_budget()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL_MODE:
        return
    if REQUIRE_INTEGRATION:
        raise pytest.UsageError("FP_REQUIRE_INTEGRATION=1 but DATABASE_URL/REDIS_URL are not both set")
    skip = pytest.mark.skip(reason="integration: needs DATABASE_URL (PostgreSQL) and REDIS_URL (Redis)")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    """Rate-limit counters and locks must not leak between tests (Redis outlives the test DB)."""
    yield
    from django.core.cache import cache

    if settings.CACHES["default"]["BACKEND"].endswith("RedisCache"):
        client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
        keys = list(client.scan_iter("fpcache:*"))
        if keys:
            client.delete(*keys)
    else:
        with contextlib.suppress(Exception):  # the cache table exists only for tests that use the DB
            cache.clear()


# --- users, teams, clients ----------------------------------------------------------------------------
@pytest.fixture
def make_user(db: Any) -> Callable[..., Any]:
    from accounts.models import Membership, Team, User

    def _make(role: str = "planner", team: Any = None, username: str | None = None) -> Any:
        username = username or f"{role}-{uuid.uuid4().hex[:6]}"
        user = User.objects.create_user(username=username, password="pw-" + username)
        if team is None:
            team = Team.objects.create(name=f"Team {username}", slug=f"t-{uuid.uuid4().hex[:8]}")
        if role:
            Membership.objects.create(user=user, team=team, role=role)
        user.test_team = team
        return user

    return _make


@pytest.fixture
def team(db: Any) -> Any:
    from accounts.models import Team

    return Team.objects.create(name="Team X", slug="team-x")


@pytest.fixture
def other_team(db: Any) -> Any:
    from accounts.models import Team

    return Team.objects.create(name="Team Y", slug="team-y")


@pytest.fixture
def api_client_for() -> Callable[[Any], APIClient]:
    def _client(user: Any) -> APIClient:
        client = APIClient()
        client.force_authenticate(user=user)
        return client

    return _client


@pytest.fixture
def token_client_for(db: Any) -> Callable[..., tuple[APIClient, Any]]:
    from accounts.models import ApiToken

    def _client(user: Any, team: Any) -> tuple[APIClient, Any]:
        token, raw = ApiToken.issue(user=user, team=team, name="test")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        return client, token

    return _client


# --- a real Celery worker process ---------------------------------------------------------------------
def _worker_env() -> dict[str, str]:
    """Environment for a worker subprocess that shares the test database."""
    env = dict(os.environ)
    db = settings.DATABASES["default"]
    env["DATABASE_URL"] = (
        f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )
    env["DJANGO_SETTINGS_MODULE"] = "planner.settings"
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("LOG_LEVEL", "WARNING")
    return env


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen[bytes], name: str, log: Path) -> None:
        self.proc = proc
        self.name = name
        self.log = log

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Kill the worker's whole process group (main process and pool children)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture
def celery_worker_factory(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real ``celery -A planner worker`` subprocesses against the test DB and Redis.

    Requires a ``transactional_db`` test so rows written by the test are visible to the worker.
    """
    started: list[WorkerProcess] = []

    def _start(queues: str = "default,simulations", concurrency: int = 1, pool: str = "prefork",
               extra_env: dict[str, str] | None = None, wait: bool = True) -> WorkerProcess:
        name = f"w{len(started)}-{uuid.uuid4().hex[:6]}@%h"
        log = tmp_path / f"worker-{len(started)}.log"
        env = _worker_env()
        env.update(extra_env or {})
        # FP_TASK_TEST_DELAY_S: the worker runs tests/slow_worker.py (the real app, each engine call slowed down)
        app = "tests.slow_worker" if env.get("FP_TASK_TEST_DELAY_S") else "planner"
        cmd = [sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues, "-c", str(concurrency),
               "-P", pool, "-n", name, "--without-gossip", "--without-mingle", "-l", "INFO"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        worker = WorkerProcess(proc, name, log)
        started.append(worker)
        if wait:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if "ready." in worker.output():
                    break
                if proc.poll() is not None:
                    raise RuntimeError(f"worker exited early:\n{worker.output()}")
                time.sleep(0.2)
            else:
                worker.kill()
                raise RuntimeError(f"worker not ready in 60 s:\n{worker.output()}")
        return worker

    yield _start
    for worker in started:
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            worker.kill(signal.SIGKILL)


@pytest.fixture
def purge_broker() -> Iterator[None]:
    """Empty the Celery queues before and after a test (stale messages from earlier tests)."""
    from planner.celery import app

    app.control.purge()
    yield
    app.control.purge()


# --- make it visible that the integration tests really ran ----------------------------------------------
_INTEGRATION_OUTCOMES: dict[str, int] = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "integration" not in report.keywords:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _INTEGRATION_OUTCOMES[report.outcome] = _INTEGRATION_OUTCOMES.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    o = _INTEGRATION_OUTCOMES
    if sum(o.values()):
        backend = "PostgreSQL + Redis + real Celery worker processes" if FULL_MODE else "not configured"
        terminalreporter.write_line(
            f"integration tests ({backend}): {o['passed']} passed, {o['failed']} failed, {o['skipped']} skipped"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    """The very last line when integration or browser tests (browser tests are integration tests too) skipped."""
    skipped = _INTEGRATION_OUTCOMES["skipped"]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if skipped and reporter is not None:
        why = "chromium or a service they need is missing" if FULL_MODE else \
            "PostgreSQL and Redis are not running (DATABASE_URL / REDIS_URL unset)"
        reporter.write_line(
            f"{skipped} integration/browser tests skipped: {why}. Run them with: bash .ci/run "
            "(as root or with sudo: it installs and starts PostgreSQL, Redis and chromium)", yellow=True, bold=True)


# --- the planning/simulation world: a loaded default catalog, a small valid scenario per team, and a
# deterministic stand-in for the engine where a test is about the plumbing, not physics (used by
# tests/planning, tests/simulations, tests/accounts and tests/portal) --------------------------------
MODEL = {
    "name": "GPT-1.7B", "layers": 24, "hidden": 2304, "heads": 24, "kv_heads": 24, "ffn_hidden": 9216,
    "gated_ffn": False, "vocab": 51200, "seq_len": 2048,
}
TRAINING = {"global_batch": 512, "micro_batch": 1, "precision": "bf16", "recompute": "full", "tokens": 3.0e11,
            "zero": 0}
PARALLELISM = {"tp": 1, "pp": 1, "dp": 32, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": False}
CLUSTER = {"gpu": "A100-80GB", "gpus": 32, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 200,
           "fabric": "infiniband", "topology": "fat-tree", "oversubscription": 1.0}


@pytest.fixture
def default_catalog(db: Any) -> Any:
    from planning import services

    return services.catalog_load_default().catalog


@pytest.fixture
def planner_user(make_user: Callable[..., Any], team: Any) -> Any:
    return make_user("planner", team)


@pytest.fixture
def world(default_catalog: Any, make_user: Callable[..., Any], team: Any, other_team: Any) -> dict[str, Any]:
    """Team X (one user per role) and team Y (an admin), each with a fleet, workload and two scenarios."""
    from planning import services

    users = {role: make_user(role, team) for role in ("viewer", "planner", "finance", "admin")}
    other_admin = make_user("admin", other_team)

    def objects(t: Any, actor: Any) -> dict[str, Any]:
        fleet = services.fleet_create(team=t, user=actor, name=f"{t.slug} pod", server_model="HGX-A100-80GB",
                                      server_count=4, nic_gbps=200, fabric="infiniband", topology="fat-tree")
        workload = services.workload_create(team=t, user=actor, name=f"{t.slug} GPT-1.7B",
                                            model=copy.deepcopy(MODEL), training=copy.deepcopy(TRAINING),
                                            parallelism=copy.deepcopy(PARALLELISM))
        scenario = services.scenario_create(team=t, user=actor, name=f"{t.slug} adhoc", workload=workload,
                                            cluster=copy.deepcopy(CLUSTER))
        fleet_scenario = services.scenario_create(team=t, user=actor, name=f"{t.slug} fleet", workload=workload,
                                                  fleet=fleet)
        catalog = services.catalog_fork(catalog=default_catalog, team=t, user=actor)
        return {"fleet": fleet, "workload": workload, "scenario": scenario, "fleet_scenario": fleet_scenario,
                "catalog": catalog}

    return {"team": team, "users": users, "other_team": other_team, "other_admin": other_admin,
            "x": objects(team, users["admin"]), "y": objects(other_team, other_admin)}


def fake_result(kind: str, document: dict[str, Any], catalog: dict[str, Any], params: Any) -> dict[str, Any]:
    """Deterministic engine stand-in: figures move with cluster size, NIC speed and GPU price."""
    cluster = document["cluster"]
    gpus = float(cluster.get("gpus", 8))
    nic = float(cluster.get("nic_gbps", 400))
    gpu_price = float((catalog.get(cluster.get("gpu", ""), {}) or {}).get("unit_price_usd") or 10000.0)
    step = 1000.0 / gpus + 40.0 / nic
    result: dict[str, Any] = {
        "step_time_s": step, "tokens_per_s": 1e6 / step, "mfu": 0.4 + nic / 10000.0,
        "time_to_train_days": step * 10, "network_wait_fraction": 4.0 / nic, "fits": True,
        "breakdown_s": {"compute": step * 0.8, "dp_comm_exposed": step * 0.2},
    }
    if kind == "tco":
        capex = gpus * gpu_price * 1.5
        result = {
            "performance": result,
            "tco": {"capex_usd": capex, "annual_tco_usd": capex / 3 + 1000, "usd_per_gpu_hour": 2.0,
                    "run_cost_usd": capex / 100, "usd_per_million_tokens": 0.5 + 1 / nic,
                    "line_items": [
                        {"category": "compute", "item": "GPU", "quantity": gpus, "unit_price_usd": gpu_price,
                         "total_usd": gpus * gpu_price, "source": "catalog"},
                        {"category": "network", "item": "=HYPERLINK(\"http://x\")", "quantity": 1,
                         "unit_price_usd": 5.0, "total_usd": 5.0, "source": "+evil"},
                    ]},
            "fabric": {"switches": {"leaf": 2, "spine": 1, "core": 0, "total": 3}},
        }
    return result


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Replace the engine call; returns the list of (kind, document) calls made."""
    from simulations import services

    calls: list[tuple[str, dict[str, Any]]] = []

    def call(kind: str, document: dict[str, Any], catalog: dict[str, Any], params: Any) -> dict[str, Any]:
        calls.append((kind, document))
        return fake_result(kind, document, catalog, params)

    monkeypatch.setattr(services.execution, "compute", call)
    return calls


@pytest.fixture
def finished_run(fake_engine: Any) -> Callable[..., Any]:
    """Submit and execute a run in-process (no broker); returns the refreshed row."""
    from simulations import services

    def _run(scenario: Any, user: Any, kind: str = "tco", force: bool = True) -> Any:
        run = services.run_submit(scenario=scenario, user=user, kind=kind, force=force)
        services.run_execute(run_id=run.pk)
        run.refresh_from_db()
        return run

    return _run
