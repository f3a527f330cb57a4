"""The OpenAPI schema generates and documents the planning/simulation endpoints with examples."""

from __future__ import annotations

from typing import Any

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


def _schema(api_client_for: Any, make_user: Any) -> dict[str, Any]:
    client = api_client_for(make_user("viewer"))
    r = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    return r.json()


def _ref(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def test_run_result_and_run_submission_have_typed_responses(api_client_for: Any, make_user: Any) -> None:
    """Issue #24: GET /runs/{id}/result/ had no response schema; POST /scenarios/{id}/run/ documented only 202."""
    schema = _schema(api_client_for, make_user)
    paths = schema["paths"]
    result = paths["/api/v1/runs/{id}/result/"]["get"]["responses"]
    assert {"200", "409", "404"} <= set(result)
    body = _ref(schema, result["200"]["content"]["application/json"]["schema"])
    variants = [_ref(schema, v) for v in body["oneOf"]]
    kinds = {}
    for v in variants:  # each variant's kind is one value (or any other kind), so exactly one matches a body
        kind = _ref(schema, v["properties"]["kind"])
        kinds[tuple(kind.get("enum", ["*other*"]))] = v
    assert set(kinds) == {("predict",), ("search",), ("tco",), ("fleet",), ("fabric",), ("*other*",)}
    mapping = {k[0]: v for k, v in kinds.items()}
    tco = mapping["tco"]
    assert {"run", "kind", "engine_version", "input_hash", "result"} <= set(tco["properties"])
    tco_result = _ref(schema, tco["properties"]["result"])
    section = _ref(schema, tco_result["properties"]["tco"])
    assert section["properties"]["capex_usd"]["type"] == "number"
    line = _ref(schema, section["properties"]["line_items"]["items"])
    assert {"total_usd", "basis", "annual_usd", "source"} <= set(line["properties"])
    perf = _ref(schema, mapping["predict"]["properties"]["result"])
    assert perf["properties"]["mfu"]["type"] == "number" and "step_time_s" in perf["properties"]
    conflict = _ref(schema, result["409"]["content"]["application/json"]["schema"])
    assert {"errors", "status", "error", "error_field"} <= set(conflict["properties"])

    run = paths["/api/v1/scenarios/{id}/run/"]["post"]
    assert {"202", "200", "400", "401", "403", "404"} <= set(run["responses"])
    for code in ("202", "200"):
        submitted = _ref(schema, run["responses"][code]["content"]["application/json"]["schema"])
        assert {"id", "url", "status", "reused"} <= set(submitted["properties"])
        assert "Location" in run["responses"][code].get("headers", {})
    for code in ("400", "403", "404"):
        error = _ref(schema, run["responses"][code]["content"]["application/json"]["schema"])
        assert {"errors", "status"} <= set(error["properties"])
    assert {"202", "200", "400"} <= set(paths["/api/v1/runs/"]["post"]["responses"])


def test_exports_document_each_format(api_client_for: Any, make_user: Any) -> None:
    schema = _schema(api_client_for, make_user)
    paths = schema["paths"]
    for path in ("/api/v1/runs/{id}/export/", "/api/v1/reports/{id}/export/"):
        ok = paths[path]["get"]["responses"]["200"]["content"]
        assert ok["text/csv"]["schema"]["type"] == "string"
        assert ok["application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"]["schema"]["format"] == "binary"
        assert "$ref" in ok["application/json"]["schema"], path
    items = _ref(schema, paths["/api/v1/runs/{id}/export/"]["get"]["responses"]["200"]["content"]
                 ["application/json"]["schema"])
    line = _ref(schema, items["properties"]["rows"]["items"])
    assert {"capex_usd", "opex_usd_per_year", "tco_usd_per_year", "note"} <= set(line["properties"])
    assert {"totals", "notes"} <= set(items["properties"])
    compare = paths["/api/v1/reports/compare/"]["get"]["responses"]["200"]["content"]
    row = _ref(schema, _ref(schema, compare["application/json"]["schema"])["properties"]["rows"]["items"])
    assert {"label", "unit", "kind", "change_unit", "delta", "delta_pct"} <= set(row["properties"])
    assert "text/csv" in compare
