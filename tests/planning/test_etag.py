"""Optimistic concurrency: a stale If-Match is refused with 412 and changes nothing."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def _fleet(client) -> int:
    resp = client.post("/api/v1/fleets/", {"name": "f1", "server_model": "HGX-H100", "server_count": 4},
                       format="json")
    assert resp.status_code == 201, resp.content
    return resp.json()["id"]


def test_stale_if_match_is_412_and_nothing_changes(make_user, api_client_for) -> None:
    from planning.models import Fleet

    alice = make_user("planner")
    bob = make_user("planner", team=alice.test_team)
    a, b = api_client_for(alice), api_client_for(bob)
    pk = _fleet(a)
    url = f"/api/v1/fleets/{pk}/"
    tag_a = a.get(url)["ETag"]
    tag_b = b.get(url)["ETag"]
    assert tag_a == tag_b and tag_a.startswith('"')

    ok = b.patch(url, {"notes": "bob was here"}, format="json", HTTP_IF_MATCH=tag_b)
    assert ok.status_code == 200
    assert ok["ETag"] != tag_b

    stale = a.patch(url, {"notes": "alice overwrites"}, format="json", HTTP_IF_MATCH=tag_a)
    assert stale.status_code == 412
    assert stale.json()["status"] == 412
    assert Fleet.objects.get(pk=pk).notes == "bob was here"
    assert a.delete(url, HTTP_IF_MATCH=tag_a).status_code == 412
    assert Fleet.objects.filter(pk=pk).exists()

    fresh = a.get(url)["ETag"]
    assert a.patch(url, {"notes": "alice, re-read"}, format="json", HTTP_IF_MATCH=fresh).status_code == 200


def test_without_if_match_last_write_wins(make_user, api_client_for) -> None:
    client = api_client_for(make_user("planner"))
    pk = _fleet(client)
    assert client.patch(f"/api/v1/fleets/{pk}/", {"notes": "x"}, format="json").status_code == 200
