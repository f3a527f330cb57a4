"""An unrouted URL under /api/ answers 404 with the API's JSON error body (found by the fuzzing run: an id with a dot,
which the router's pattern does not take, got the portal's HTML page); elsewhere the portal's page."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/scenarios/.h%C3%9F0%5B%C2%B7/run/", "/api/v1/nonexistent/",
                                  "/api/v1/scenarios/a.b/"])
def test_an_unrouted_api_url_is_a_json_404(client: Any, path: str) -> None:
    for method in (client.get, client.post, client.delete):
        r = method(path)
        assert r.status_code == 404
        assert r["Content-Type"].startswith("application/json")
        assert r.json() == {"errors": {"detail": ["Not found."]}, "status": 404}


@pytest.mark.django_db
def test_an_unrouted_portal_url_is_the_portal_page(client: Any) -> None:
    r = client.get("/no-such-page/")
    assert r.status_code == 404
    assert r["Content-Type"].startswith("text/html")
    assert b"Not found" in r.content


@pytest.mark.django_db
def test_a_routed_api_detail_that_does_not_exist_has_the_same_body(api_client_for: Any, world: Any) -> None:
    r = api_client_for(world["users"]["planner"]).get("/api/v1/scenarios/999999999/")
    assert r.status_code == 404
    assert r.json() == {"errors": {"detail": ["Not found."]}, "status": 404}
