"""API base: one error body, schema + docs, health endpoints, request ids, login throttling."""

from __future__ import annotations

from unittest import mock

import pytest
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_unauthenticated_gets_401_in_the_common_error_body() -> None:
    resp = APIClient().get("/api/v1/me/")
    assert resp.status_code == 401
    body = resp.json()
    assert body["status"] == 401
    assert isinstance(body["errors"]["detail"], list)


def test_404_uses_the_common_error_body(make_user, api_client_for) -> None:
    resp = api_client_for(make_user("viewer")).get("/api/v1/tokens/999999/")
    assert resp.status_code == 404
    assert resp.json() == {"errors": {"detail": [mock.ANY]}, "status": 404}


def test_400_names_the_field(make_user, api_client_for) -> None:
    resp = api_client_for(make_user("finance")).post("/api/v1/tokens/", {"name": ""}, format="json")
    assert resp.status_code == 400
    assert "name" in resp.json()["errors"]
    # one machine code per message, DRF's own code for a serializer's field
    assert resp.json()["codes"]["name"] == ["blank"]


def test_domain_errors_keep_the_engine_code() -> None:
    from core.api.errors import translate_domain_error
    from core.errors import engine_error
    from engine.errors import NO_LAYOUT, ScenarioError

    exc = translate_domain_error(engine_error(ScenarioError("parallelism", "no layout fits", NO_LAYOUT),
                                              "document.parallelism"))
    assert exc.get_codes() == {"document.parallelism": ["no_layout"]}
    assert str(exc.detail["document.parallelism"][0]) == "no layout fits"


def test_flatten_nested_errors() -> None:
    from core.api.errors import flatten_errors

    nested = {"cluster": {"gpus": ["must be positive"]}, "axes": [{}, {"values": ["empty"]}], "non_field_errors": ["x"]}
    assert flatten_errors(nested) == {"cluster.gpus": ["must be positive"], "axes.1.values": ["empty"], "detail": ["x"]}


def test_openapi_schema_and_swagger_ui_are_served() -> None:
    client = Client()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    doc = schema.json()
    assert doc["openapi"].startswith("3.")
    assert "/api/v1/tokens/" in doc["paths"]
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()


def test_healthz_and_readyz() -> None:
    client = Client()
    assert client.get("/healthz").json() == {"status": "ok"}
    resp = client.get("/readyz")
    assert resp.status_code == 200, resp.content
    assert resp.json()["checks"] == {"database": "ok", "broker": "ok"}


def test_readyz_reports_a_down_database_as_503_with_reason() -> None:
    with mock.patch("planner.health.connection") as conn:
        conn.cursor.side_effect = RuntimeError("connection refused")
        resp = Client().get("/readyz")
    assert resp.status_code == 503
    assert "database unreachable" in resp.json()["checks"]["database"]
    assert "connection refused" in resp.json()["checks"]["database"]


def test_readyz_reports_a_down_broker_as_503(settings) -> None:
    from planner.celery import app

    with mock.patch.object(app, "connection_for_write", side_effect=OSError("broker gone")):
        resp = Client().get("/readyz")
    assert resp.status_code == 503
    assert "broker unreachable" in resp.json()["checks"]["broker"]


def test_request_id_is_echoed() -> None:
    resp = Client().get("/healthz", HTTP_X_REQUEST_ID="abc123")
    assert resp["X-Request-ID"] == "abc123"
    assert len(Client().get("/healthz")["X-Request-ID"]) == 32


def test_portal_login_is_rate_limited(make_user) -> None:
    make_user("viewer", username="alice")
    client = Client()
    for _ in range(10):
        assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    resp = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert resp.status_code == 429


def test_portal_login_works(make_user) -> None:
    make_user("viewer", username="bob")
    client = Client()
    resp = client.post("/accounts/login/", {"username": "bob", "password": "pw-bob"})
    assert resp.status_code == 302
    assert client.get("/api/v1/me/").json()["username"] == "bob"


def test_nul_characters_in_json_are_refused_with_a_400(make_user, api_client_for) -> None:
    client = api_client_for(make_user("finance"))
    resp = client.post("/api/v1/tokens/", '{"name": "a\\u0000b"}', content_type="application/json")
    assert resp.status_code == 400
    assert "NUL" in resp.json()["errors"]["detail"][0]
    resp = client.post("/api/v1/tokens/", '{"name": "ok", "x": {"\\u0000": 1}}', content_type="application/json")
    assert resp.status_code == 400
    from accounts.models import ApiToken

    assert not ApiToken.objects.exists()


def test_nul_characters_are_refused_on_domain_endpoints(make_user, api_client_for) -> None:
    from planning.models import Workload

    client = api_client_for(make_user("planner"))
    resp = client.post(
        "/api/v1/workloads/", '{"name": "w", "model": {"\\u0000": 1}, "training": {}}', content_type="application/json"
    )
    assert resp.status_code == 400, resp.content
    assert "NUL" in resp.json()["errors"]["detail"][0]
    resp = client.post("/api/v1/fleets/import/", {"file": "x", "note": "a\x00b"}, format="multipart")
    assert resp.status_code == 400, resp.content
    assert not Workload.objects.exists()


def test_database_data_errors_become_400(make_user, api_client_for) -> None:
    from unittest import mock

    from django.db import DataError

    client = api_client_for(make_user("finance"))
    with mock.patch("accounts.services.ApiToken.issue", side_effect=DataError("value too long\nDETAIL: x")):
        resp = client.post("/api/v1/tokens/", {"name": "x"}, format="json")
    assert resp.status_code == 400
    assert resp.json()["errors"]["detail"] == ["A value cannot be stored: value too long"]
