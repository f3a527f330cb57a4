"""Concurrent submissions on PostgreSQL + Redis with real threads and connections (issue #23).

* 30 identical sweep requests at once make one sweep (the probe made 30): every child carries the idempotency
  key ``sweep:<input hash>:<i>``, unique among active runs, and the team's row is locked while a request checks
  and inserts — one request inserts, the others answer its sweep (200, ``reused``);
* the same with one ``Idempotency-Key``, and for a capacity plan's replication fan-out;
* the team's share holds under concurrency: 12 different runs at once against FP_TEAM_MAX_ACTIVE_RUNS=5 → five
  202s and seven 429s;
* the token throttle (20/min) lets exactly 20 of a burst of 25 through (slots claimed with Redis SET NX).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from tests.security.seed import CAPACITY_PLAN, seed_world

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

N = 30


def _burst(token: str, requests: list[tuple[str, dict[str, Any], dict[str, str]]]) -> list[Any]:
    barrier = threading.Barrier(len(requests))
    out: list[Any] = [None] * len(requests)

    def submit(i: int) -> None:
        from django.db import connection

        url, body, headers = requests[i]
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        client.raise_request_exception = False
        try:
            barrier.wait()
            out[i] = client.post(url, body, format="json", **headers)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def _token(world: Any) -> str:
    from accounts.models import ApiToken

    return ApiToken.issue(user=world.home.users["admin"], team=world.home.team, name="burst")[1]


def _codes(responses: list[Any]) -> list[int]:
    return sorted(r.status_code for r in responses)


def test_thirty_identical_sweeps_make_one_sweep(purge_broker: None) -> None:
    from simulations.models import SimulationRun, Sweep

    world = seed_world(execute=False)
    token = _token(world)
    url = f"/api/v1/scenarios/{world.home.scenario.pk}/sweep/"
    before = set(Sweep.objects.values_list("pk", flat=True))
    body = {"kind": "tco", "axes": {"cluster.nic_gbps": [100, 200, 400, 800]}, "params": {"seed": 11}}
    responses = _burst(token, [(url, body, {})] * N)
    assert all(r.status_code in (200, 202) for r in responses), [(r.status_code, r.content[:200]) for r in responses]
    assert len({r.json()["id"] for r in responses}) == 1
    assert _codes(responses) == [200] * (N - 1) + [202]
    new = Sweep.objects.exclude(pk__in=before)
    assert new.count() == 1 and SimulationRun.objects.filter(sweep__in=new).count() == 4

    keyed = {"kind": "tco", "axes": {"cluster.nic_gbps": [100, 800]}}
    responses = _burst(token, [(url, keyed, {"HTTP_IDEMPOTENCY_KEY": "one-key"})] * N)
    assert len({r.json()["id"] for r in responses}) == 1, _codes(responses)
    assert Sweep.objects.exclude(pk__in=before).count() == 2


def test_thirty_identical_replications_make_one_sweep(purge_broker: None) -> None:
    from planning.services.capacity_plans import capacity_plan_create
    from simulations.models import SimulationRun, Sweep

    world = seed_world(execute=False)
    token = _token(world)
    plan = capacity_plan_create(team=world.home.team, user=world.home.users["admin"], name="burst plan",
                                document=dict(CAPACITY_PLAN))
    before = set(Sweep.objects.values_list("pk", flat=True))
    responses = _burst(token, [(f"/api/v1/capacity-plans/{plan.pk}/replicate/",
                                {"replications": 30, "chunk": 10}, {})] * N)
    assert len({r.json()["sweep"] for r in responses}) == 1, _codes(responses)
    new = Sweep.objects.exclude(pk__in=before)
    assert new.count() == 1 and SimulationRun.objects.filter(sweep__in=new).count() == 3


def test_the_team_share_holds_under_concurrency(purge_broker: None) -> None:
    from simulations.models import ACTIVE_STATUSES, SimulationRun

    world = seed_world(execute=False)
    token = _token(world)
    team = world.home.team
    active = SimulationRun.objects.filter(team=team, status__in=ACTIVE_STATUSES).count()
    url = f"/api/v1/scenarios/{world.home.scenario.pk}/run/"
    requests = [(url, {"kind": "tco", "params": {"seed": 100 + i}}, {}) for i in range(12)]
    with override_settings(FP_TEAM_MAX_ACTIVE_RUNS=active + 5):
        responses = _burst(token, requests)
    assert _codes(responses) == [202] * 5 + [429] * 7, [(r.status_code, r.content[:200]) for r in responses]
    assert all(r["Retry-After"] for r in responses if r.status_code == 429)
    assert SimulationRun.objects.filter(team=team, status__in=ACTIVE_STATUSES).count() == active + 5


def test_token_throttle_holds_under_a_burst(purge_broker: None) -> None:
    from accounts.models import ApiToken

    world = seed_world(execute=False)
    user = world.home.users["finance"]
    _, token = ApiToken.issue(user=user, team=world.home.team, name="burst")
    before = ApiToken.objects.filter(user=user).count()
    responses = _burst(token, [("/api/v1/tokens/", {"name": f"t{i}"}, {}) for i in range(25)])
    assert _codes(responses) == [201] * 20 + [429] * 5, _codes(responses)
    assert ApiToken.objects.filter(user=user).count() == before + 20


def test_a_connection_killed_mid_get_is_retried_not_a_500(monkeypatch: pytest.MonkeyPatch) -> None:
    """pg_terminate_backend on the request's own connection, from another connection, in the middle of a GET
    (the probe's 500): the request is answered from a fresh connection."""
    import psycopg
    from django.conf import settings
    from django.db import connection
    from django.db.models.query import QuerySet

    world = seed_world(execute=False)
    token = _token(world)
    db = settings.DATABASES["default"]
    kills: list[int] = []
    fetch = QuerySet._fetch_all

    def kill_once(self: QuerySet[Any]) -> None:
        if not kills and self.model.__name__ == "Scenario":
            pid = connection.cursor().connection.info.backend_pid
            with psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"],
                                 password=db.get("PASSWORD") or None, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            kills.append(pid)
        fetch(self)

    monkeypatch.setattr(QuerySet, "_fetch_all", kill_once)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    client.raise_request_exception = False
    resp = client.get("/api/v1/scenarios/")
    assert kills, "the connection was not killed"
    assert resp.status_code == 200, resp.content[:300]
    connection.close()
