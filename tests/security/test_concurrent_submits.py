"""Concurrent identical submissions return the same run (PostgreSQL, real threads, real connections).

The probe of issue #11 sent 30 identical run requests at once and got 30 rows and 2 engine executions. Now a
conditional unique constraint on the run's idempotency key (while queued or running) lets exactly one insert
win; every other request answers the winner's id. A real Celery worker then executes it once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.security.seed import seed_world

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

N = 30


def _burst(token: str, url: str, body: dict[str, Any], n: int = N) -> list[Any]:
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def submit(i: int) -> None:
        from django.db import connection

        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        client.raise_request_exception = False
        barrier.wait()
        try:
            out[i] = client.post(url, body, format="json")
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_thirty_identical_submissions_make_one_run_executed_once(celery_worker_factory, purge_broker) -> None:
    from accounts.models import ApiToken
    from simulations.models import SimulationRun

    world = seed_world()
    h = world.home
    _, token = ApiToken.issue(user=h.users["admin"], team=h.team, name="burst")
    before = set(SimulationRun.objects.values_list("pk", flat=True))
    body = {"kind": "tco", "params": {"seed": 7}}  # differs from any seeded run: no stored result to reuse

    responses = _burst(token, f"/api/v1/scenarios/{h.scenario.pk}/run/", body)
    codes = sorted(r.status_code for r in responses)
    assert all(c in (200, 202) for c in codes), [(r.status_code, r.content[:200]) for r in responses if r.status_code >= 300]
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 1, f"{len(ids)} different runs for {N} identical submissions"
    new = SimulationRun.objects.exclude(pk__in=before)
    assert new.count() == 1
    assert codes.count(202) == 1 and codes.count(200) == N - 1, codes  # one created, the others answered with it
    assert sum(bool(r.json().get("reused")) for r in responses) == N - 1

    celery_worker_factory(queues="simulations,default", concurrency=2)
    run = new.get()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.2)
    assert run.status == "succeeded", (run.status, run.error)
    assert run.attempts == 1, "executed once"

    # Once it has finished, an identical submission reuses the stored result (no new row, no execution).
    again = _burst(token, f"/api/v1/scenarios/{h.scenario.pk}/run/", body, n=5)
    assert {r.json()["id"] for r in again} == {run.pk}
    assert SimulationRun.objects.exclude(pk__in=before).count() == 1


def test_forced_and_different_submissions_are_not_merged(purge_broker) -> None:
    """Distinct inputs (other params) are different runs; a queued run's key frees when it ends."""
    from accounts.models import ApiToken
    from simulations.models import SimulationRun

    world = seed_world()
    h = world.home
    _, token = ApiToken.issue(user=h.users["admin"], team=h.team, name="burst2")
    before = set(SimulationRun.objects.values_list("pk", flat=True))
    url = f"/api/v1/scenarios/{h.scenario.pk}/run/"
    a = _burst(token, url, {"kind": "tco", "params": {"seed": 11}}, n=6)
    b = _burst(token, url, {"kind": "tco", "params": {"seed": 12}}, n=6)
    ids_a, ids_b = {r.json()["id"] for r in a}, {r.json()["id"] for r in b}
    assert len(ids_a) == 1 and len(ids_b) == 1 and ids_a != ids_b
    assert SimulationRun.objects.exclude(pk__in=before).count() == 2

    # Cancel the first: its key is free again, so a new identical submission makes a new run.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    (run_a,) = ids_a
    assert client.post(f"/api/v1/runs/{run_a}/cancel/").status_code == 200
    again = client.post(url, {"kind": "tco", "params": {"seed": 11}}, format="json")
    assert again.status_code == 202 and again.json()["id"] != run_a
