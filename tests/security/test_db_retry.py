"""A dropped database connection (issue #23: a PostgreSQL connection kill mid-request answered 500): an idempotent
request is run once more on a fresh connection (planner.middleware.DatabaseRetryMiddleware); a second failure, or
a write, answers 503 with Retry-After — never 500. The drop is simulated by making a query raise OperationalError
(the error psycopg raises when the server closes the connection)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError
from django.db.models.query import QuerySet

pytestmark = pytest.mark.django_db(transaction=True)  # no test transaction around the request: as in production


@pytest.fixture
def drops(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """``drops["left"]`` queries from now on fail as if the server had closed the connection."""
    state = {"left": 0, "raised": 0}
    fetch = QuerySet._fetch_all

    def flaky(self: QuerySet[Any]) -> None:
        if state["left"] > 0:
            state["left"] -= 1
            state["raised"] += 1
            raise OperationalError("server closed the connection unexpectedly")
        fetch(self)

    monkeypatch.setattr(QuerySet, "_fetch_all", flaky)
    yield state


def test_a_get_survives_one_drop(world: dict[str, Any], api_client_for: Any, client: Any,
                                 drops: dict[str, int]) -> None:
    api = api_client_for(world["users"]["planner"])
    client.force_login(world["users"]["planner"])
    for target, url in ((api, "/api/v1/scenarios/"), (api, f"/api/v1/scenarios/{world['x']['scenario'].pk}/"),
                        (client, "/runs/"), (client, "/scenarios/")):
        drops.update(left=1, raised=0)
        resp = target.get(url)
        assert resp.status_code == 200, (url, resp.status_code, resp.content[:300])
        assert drops["raised"] == 1


def test_a_get_that_keeps_failing_is_a_503_not_a_500(world: dict[str, Any], api_client_for: Any, client: Any,
                                                    drops: dict[str, int]) -> None:
    api = api_client_for(world["users"]["planner"])
    api.raise_request_exception = False
    client.force_login(world["users"]["planner"])
    client.raise_request_exception = False
    for target, url in ((api, "/api/v1/scenarios/"), (client, "/runs/")):
        drops.update(left=10_000, raised=0)
        resp = target.get(url)
        assert resp.status_code == 503 and resp["Retry-After"], (url, resp.status_code, resp.content[:300])
        assert drops["raised"] == 2  # the request and its one retry
    drops.update(left=0)


def test_a_write_is_never_replayed(world: dict[str, Any], api_client_for: Any, drops: dict[str, int]) -> None:
    from simulations.models import SimulationRun

    api = api_client_for(world["users"]["planner"])
    api.raise_request_exception = False
    before = SimulationRun.objects.count()
    drops.update(left=1, raised=0)
    resp = api.post(f"/api/v1/scenarios/{world['x']['scenario'].pk}/run/", {"kind": "tco"}, format="json")
    assert resp.status_code == 503 and resp.json()["status"] == 503 and resp["Retry-After"]
    assert drops["raised"] == 1 and SimulationRun.objects.count() == before
