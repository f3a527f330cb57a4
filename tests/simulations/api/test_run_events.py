"""A run's execution history (``RunEvent``: claims, lapsed leases, re-sent messages, the end) is shown: in the API at
``/runs/{id}/events/`` (team-scoped like the run, oldest first, paged, typed in OpenAPI) and in Django admin."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_with_history(world: Any, finished_run: Any) -> Any:
    """A finished run whose history also holds a lease the reaper found lapsed, written before the claim."""
    from simulations.models import RunEvent
    from simulations.services.leases import record_event

    run = finished_run(world["x"]["scenario"], world["users"]["planner"])
    first = run.events.order_by("at").first()
    assert first is not None  # executing the run recorded its claim
    record_event(run.pk, RunEvent.Kind.LEASE_LAPSED, attempt=1, worker="reaper",
                 message="no heartbeat for 95 s (lease 30 s)", at=first.at - timedelta(seconds=5))
    return run


def test_events_oldest_first_with_who_wrote_them(world: Any, run_with_history: Any, api_client_for: Any) -> None:
    client = api_client_for(world["users"]["viewer"])  # reading a run's history needs only the read capability
    r = client.get(f"/api/v1/runs/{run_with_history.pk}/events/")
    assert r.status_code == 200, r.content
    body = r.json()
    events = body["results"]
    assert body["count"] == len(events) == 3
    assert [e["kind"] for e in events] == ["lease-lapsed", "claimed", "finished"]
    lapsed, claimed, finished = events
    assert lapsed["by"] == "reaper" and lapsed["message"] == "no heartbeat for 95 s (lease 30 s)"
    assert lapsed["kind_label"] == "Lease lapsed; re-queued by the reaper"
    assert claimed["by"] == "worker" and claimed["attempt"] == 1
    assert finished["message"] == "succeeded"
    times = [e["at"] for e in events]
    assert times == sorted(times)
    # the executing host (host:pid) is the operators' business (admin), not the team's
    assert set(events[0]) == {"id", "at", "kind", "kind_label", "attempt", "by", "message"}


def test_events_are_paged(world: Any, run_with_history: Any, api_client_for: Any) -> None:
    from simulations.models import RunEvent
    from simulations.services.leases import record_event

    now = timezone.now()
    for i in range(30):
        record_event(run_with_history.pk, RunEvent.Kind.REDISPATCHED, worker="reaper", at=now + timedelta(seconds=i),
                     message=f"re-sent {i}")
    client = api_client_for(world["users"]["viewer"])
    first = client.get(f"/api/v1/runs/{run_with_history.pk}/events/?page_size=10").json()
    assert first["count"] == 33 and len(first["results"]) == 10 and first["next"]
    last = client.get(f"/api/v1/runs/{run_with_history.pk}/events/?page_size=10&page=4").json()
    assert [e["message"] for e in last["results"]] == ["re-sent 27", "re-sent 28", "re-sent 29"]


def test_another_teams_run_history_is_not_found(world: Any, run_with_history: Any, api_client_for: Any) -> None:
    r = api_client_for(world["other_admin"]).get(f"/api/v1/runs/{run_with_history.pk}/events/")
    assert r.status_code == 404
    assert "heartbeat" not in r.content.decode()


def test_events_need_credentials(run_with_history: Any) -> None:
    from rest_framework.test import APIClient

    assert APIClient().get(f"/api/v1/runs/{run_with_history.pk}/events/").status_code == 401


def test_openapi_types_the_events(world: Any, api_client_for: Any) -> None:
    schema = api_client_for(world["users"]["viewer"]).get("/api/schema/?format=json").json()
    op = schema["paths"]["/api/v1/runs/{id}/events/"]["get"]
    assert {"200", "401", "404"} <= set(op["responses"])
    page = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    item = schema["components"]["schemas"][page]["properties"]["results"]["items"]["$ref"].rsplit("/", 1)[1]
    props = schema["components"]["schemas"][item]["properties"]
    assert {"at", "kind", "kind_label", "attempt", "by", "message"} <= set(props)
    assert "worker" not in props
    assert props["by"].get("enum") == ["worker", "reaper"] or "$ref" in str(props["by"])
    params = {p["name"] for p in op.get("parameters", [])}
    assert "status" not in params and "search" not in params  # the run list's filters do not apply here


def test_admin_shows_a_runs_events(world: Any, run_with_history: Any, client: Any) -> None:
    from accounts.models import User

    admin = User.objects.create_superuser("ops", "ops@example.com", "pw-ops-1234")
    client.force_login(admin)
    page = client.get(f"/admin/simulations/simulationrun/{run_with_history.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "no heartbeat for 95 s (lease 30 s)" in html and "Claimed by an execution" in html
    listing = client.get("/admin/simulations/runevent/?kind__exact=lease-lapsed")
    assert listing.status_code == 200
    assert "no heartbeat for 95 s (lease 30 s)" in listing.content.decode()
    assert [e.kind for e in listing.context["cl"].result_list] == ["lease-lapsed"]
    # append-only: the admin adds and edits nothing
    assert client.get("/admin/simulations/runevent/add/").status_code == 403
