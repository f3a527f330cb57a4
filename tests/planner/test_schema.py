"""The OpenAPI schema generates and documents the planning/simulation endpoints with examples."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_schema_documents_planning_endpoints(api_client_for, make_user) -> None:
    client = api_client_for(make_user("viewer"))
    r = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    schema = r.json()
    paths = schema["paths"]
    for path in ("/api/v1/catalogs/", "/api/v1/catalog-versions/{id}/", "/api/v1/catalog-items/{id}/",
                 "/api/v1/fleets/import/", "/api/v1/workloads/", "/api/v1/scenarios/{id}/run/",
                 "/api/v1/scenarios/{id}/sweep/", "/api/v1/runs/{id}/cancel/", "/api/v1/runs/{id}/export/",
                 "/api/v1/reports/compare/", "/api/v1/reports/{id}/export/", "/api/v1/preview/",
                 "/api/v1/changes/", "/api/v1/reevaluations/"):
        assert path in paths, path
    run = paths["/api/v1/scenarios/{id}/run/"]["post"]
    assert "202" in run["responses"]
    assert run["requestBody"]["content"]["application/json"].get("examples")
    assert paths["/api/v1/preview/"]["post"]["requestBody"]["content"]["application/json"].get("examples")
