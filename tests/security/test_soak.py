"""Soak: hostile requests mixed with normal load for 60 s against gunicorn on PostgreSQL.

Pass: no 5xx from either stream, no hostile request accepted (2xx), the normal stream error-free, and the
normal stream's p95 unchanged within noise (``soak.p95_within_noise``). About 90 s of wall time; the figures
are printed (run with ``-s`` to see them). ``benchmarks/bench_soak.py`` runs the same soak standalone.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, _worker_env
from tests.security import soak
from tests.security.seed import seed_world

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

MIXED_S = float(os.environ.get("FP_SOAK_SECONDS", "60"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def gunicorn(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = _worker_env()
    env["CELERY_TASK_ALWAYS_EAGER"] = "0"
    log = tmp_path / "gunicorn.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "planner.wsgi:application", "--workers", "3", "--bind",
         f"127.0.0.1:{port}", "--timeout", "30", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"gunicorn exited: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)
    try:
        yield base
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        text = log.read_text(errors="replace")
        assert "WORKER TIMEOUT" not in text, text[-3000:]


def test_hostile_stream_does_not_move_normal_p95(gunicorn, purge_broker) -> None:
    from accounts.models import ApiToken
    from simulations.models import SimulationRun

    world = seed_world()
    h = world.home
    _, token = ApiToken.issue(user=h.users["admin"], team=h.team, name="soak")
    runs_before = SimulationRun.objects.count()
    compare = f"/api/v1/reports/compare/?runs={h.run.pk},{h.sweep.runs.order_by('pk').first().pk}&baseline={h.run.pk}"
    figures = soak.soak(gunicorn, {"Authorization": f"Token {token}"},
                        soak.normal_requests([h.scenario.pk, world.home.scenario.pk], compare),
                        soak.hostile_requests(h.scenario.pk), baseline_s=20.0, mixed_s=MIXED_S)
    print("\nsoak figures:", json.dumps({k: v for k, v in figures.items() if k != "hostile"}, indent=1))
    print("hostile stream:", json.dumps(figures["hostile"]))
    assert figures["normal_5xx"] == 0 and figures["hostile_5xx"] == 0, figures
    assert figures["baseline"]["errors"] == 0 and figures["mixed"]["errors"] == 0, figures
    assert figures["hostile_2xx"] == 0, figures["hostile"]["statuses"]
    assert figures["hostile"]["requests"] > 100, "the hostile stream must actually run"
    assert soak.p95_within_noise(figures["baseline"]["p95_ms"], figures["mixed"]["p95_ms"]), figures
    assert SimulationRun.objects.count() == runs_before, "no hostile submission may create a run"
