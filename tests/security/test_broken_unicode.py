"""Broken text in keys and values: every write endpoint answers a JSON 4xx (never a 500) and stores nothing.

JSON can carry escapes for text that is not valid Unicode (a lone surrogate ``"\\ud800"``); such a string can be
neither stored (PostgreSQL text is UTF-8) nor written back in a UTF-8 response. Raw bodies can carry bytes that
are not UTF-8 at all. Each kind is sent as a key and as a value, at the top level and nested, to every
POST/PUT/PATCH endpoint the URL resolver knows (and as CSV header and cell to the import endpoints). Valid but
unusual text (noncharacters, BOM, bidi overrides) must not break anything either.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.security.seed import World, seed_world
from tests.security.test_authz_matrix import home_objects, probe_request
from tests.security.test_hostile_input import _fingerprint, _write_endpoints

pytestmark = pytest.mark.django_db

# Not valid Unicode: refused (400).
BROKEN = {
    "lone-high": "\ud800",
    "lone-low": "\udfff",
    "reversed-pair": "\udc00\ud800",
    "trailing-high": "GPU\ud83d",
    "high-in-middle": "a\udbffb",
}
# Valid Unicode that is unusual: any 2xx/4xx, never 5xx, always a JSON body.
ODD = {
    "noncharacter": "\ufffe\uffff",
    "bom": "\ufeffname",
    "bidi": "\u202egnp.exe",
    "astral": "\U0001f680\U0010fffd",
    "combining": "e\u0301" * 50,
}
# Bytes that are not UTF-8 at all, spliced into a JSON body (key and value).
RAW = {
    "cesu-surrogate": b"\xed\xa0\x80",
    "overlong-slash": b"\xc0\xaf",
    "ff": b"\xff",
    "truncated": b"\xe2\x82",
}


@pytest.fixture
def world() -> World:
    return seed_world()


@pytest.fixture
def admin(world: World) -> APIClient:
    c = APIClient()
    c.force_login(world.home.users["admin"])
    c.raise_request_exception = False
    return c


def _variants(body: dict[str, Any], text: str) -> list[tuple[str, dict[str, Any]]]:
    """``text`` as a top-level key, as each top-level value, and as a nested key and value."""
    out = [("top-key", {**body, text: 1}), ("only-key", {text: text})]
    for key, value in body.items():
        if isinstance(value, str | int | float):
            out.append((f"value:{key}", {**body, key: text}))
        elif isinstance(value, dict):
            nested = copy.deepcopy(body)
            nested[key] = {**value, text: 1}
            out.append((f"nested-key:{key}", nested))
            nested = copy.deepcopy(body)
            first = next(iter(value), "x")  # the text replaces a value (of whatever type) one level down
            nested[key] = {**value, first: text}
            out.append((f"nested-value:{key}", nested))
    deep = copy.deepcopy(body)
    deep["document"] = {"costs": {"prices": {text: 1}}, "model": {"name": text}}  # the probe's own example
    out.append(("deep", deep))
    return out


def _json_error(resp: Any) -> dict[str, Any]:
    assert resp["Content-Type"].startswith("application/json"), resp["Content-Type"]
    body = json.loads(resp.content.decode("utf-8"))  # the response itself is valid UTF-8 JSON
    assert body["status"] == resp.status_code and body["errors"], body
    return body


def _json_bodies(world: World) -> list[tuple[str, str, str, dict[str, Any]]]:
    objs = home_objects(world)
    out = []
    for ep, url in _write_endpoints(world):
        if "import" in ep.route:
            continue
        probe_url, body = probe_request(ep, world, objs)
        out.append((ep.id, ep.method, probe_url or url, dict(body or {})))
    return out


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_invalid_unicode_in_keys_and_values_is_a_json_400(world, admin, kind) -> None:
    before = _fingerprint()
    failures = []
    sent = 0
    for ep_id, method, url, body in _json_bodies(world):
        for where, variant in _variants(body, BROKEN[kind]):
            raw = json.dumps(variant)  # ensure_ascii: the surrogate travels as a \\uXXXX escape
            resp = admin.generic(method, url, raw, content_type="application/json")
            sent += 1
            try:
                errors = _json_error(resp)
            except Exception as exc:
                failures.append(f"{ep_id} [{where}]: {resp.status_code} not a JSON error: {exc!r} {resp.content[:120]!r}")
                continue
            if resp.status_code != 400:
                failures.append(f"{ep_id} [{where}]: want 400, got {resp.status_code} {errors}")
            elif "Unicode" not in json.dumps(errors):
                failures.append(f"{ep_id} [{where}]: the error should say the text is not valid Unicode: {errors}")
    assert sent > 50
    assert not failures, f"{len(failures)} of {sent} requests:\n" + "\n".join(failures[:40])
    assert _fingerprint() == before


@pytest.mark.parametrize("kind", sorted(RAW))
def test_bytes_that_are_not_utf8_in_keys_and_values_are_a_json_400(world, admin, kind) -> None:
    before = _fingerprint()
    failures = []
    for ep_id, method, url, body in _json_bodies(world):
        marker = "BROKEN_TEXT_MARKER"
        for where, variant in _variants(body, marker)[:4]:
            raw = json.dumps(variant).encode().replace(marker.encode(), RAW[kind])
            resp = admin.generic(method, url, raw, content_type="application/json")
            try:
                _json_error(resp)
            except Exception as exc:
                failures.append(f"{ep_id} [{where}]: {resp.status_code} {exc!r} {resp.content[:120]!r}")
                continue
            if resp.status_code != 400:
                failures.append(f"{ep_id} [{where}]: want 400, got {resp.status_code}")
    assert not failures, "\n".join(failures[:40])
    assert _fingerprint() == before


@pytest.mark.parametrize("kind", sorted(ODD))
def test_unusual_but_valid_unicode_never_breaks_an_endpoint(world, admin, kind) -> None:
    failures = []
    for ep_id, method, url, body in _json_bodies(world):
        for where, variant in _variants(body, ODD[kind]):
            resp = admin.generic(method, url, json.dumps(variant), content_type="application/json")
            if resp.status_code >= 500 or not resp["Content-Type"].startswith("application/json"):
                failures.append(f"{ep_id} [{where}]: {resp.status_code} {resp.content[:120]!r}")
            else:
                json.loads(resp.content.decode("utf-8"))
    assert not failures, "\n".join(failures[:40])


def _import_urls(world: World) -> list[str]:
    return [f"/api/v1/catalogs/{world.home.catalog.pk}/import/", "/api/v1/fleets/import/"]


@pytest.mark.parametrize("kind", sorted(RAW))
def test_csv_header_and_cells_with_broken_bytes_are_a_json_400(world, admin, kind) -> None:
    before = _fingerprint()
    bad = RAW[kind]
    files = {
        "header": b"name,server_model,server_count," + bad + b"\nx,HGX-H100,2,1\n",
        "cell": b"name,server_model,server_count\nx" + bad + b",HGX-H100,2\n",
    }
    for url in _import_urls(world):
        for where, content in files.items():
            upload = SimpleUploadedFile("data.csv", content, content_type="text/csv")
            resp = admin.post(url, {"file": upload}, format="multipart")
            assert resp.status_code == 400, (url, where, resp.status_code, resp.content[:300])
            _json_error(resp)
    assert _fingerprint() == before


def test_error_for_a_surrogate_key_names_it_without_breaking_the_response(world, admin) -> None:
    """The probe's case: ``{"costs": {"prices": {"\\ud800": 1}}}`` on the preview endpoint."""
    body = {"document": {"costs": {"prices": {"\ud800": 1}}}}
    resp = admin.post("/api/v1/preview/", json.dumps(body), content_type="application/json")
    errors = _json_error(resp)["errors"]
    assert resp.status_code == 400
    text = json.dumps(errors)
    assert "\\\\ud800" in text or "U+D800" in text, errors  # named, as an escape, never as the raw surrogate


@pytest.mark.parametrize("escape", ["\\ud800", "\\u0000", "\\udfff\\ud800"])
def test_json_escapes_inside_csv_cells_are_refused(world, admin, escape) -> None:
    """A catalog CSV's ``specs`` cell holds JSON text: its escapes are decoded by the service, then checked."""
    before = _fingerprint()
    cell = '"{""note"": ""x' + escape + '""}"'
    content = ("key,kind,name,unit_price_usd,power_w,specs\nBAD-1,transceiver,Bad optic,10,1," + cell + "\n").encode()
    upload = SimpleUploadedFile("data.csv", content, content_type="text/csv")
    resp = admin.post(f"/api/v1/catalogs/{world.home.catalog.pk}/import/", {"file": upload}, format="multipart")
    assert resp.status_code == 400, resp.content[:300]
    errors = _json_error(resp)["errors"]
    assert any(k.endswith("specs") for k in errors), errors
    assert _fingerprint() == before


def test_every_endpoint_parses_with_the_safe_parsers() -> None:
    """A view that sets ``parser_classes`` to DRF's own parsers would let NUL and lone surrogates through."""
    from core.api.parsers import SafeFormParser, SafeJSONParser, SafeMultiPartParser
    from tests.security.endpoints import api_endpoints

    safe = (SafeJSONParser, SafeFormParser, SafeMultiPartParser)
    unsafe = set()
    for ep in api_endpoints():
        classes = list(getattr(ep.view_cls, "parser_classes", ()))
        handler = getattr(ep.view_cls, ep.action, None) if ep.action else None
        classes += list(getattr(handler, "kwargs", {}).get("parser_classes", ()) or ())
        unsafe |= {f"{ep.id}: {c.__module__}.{c.__name__}" for c in classes if not issubclass(c, safe)}
    assert not unsafe, sorted(unsafe)


def test_renderer_falls_back_to_ascii_escapes() -> None:
    """Defence in depth: if unencodable text ever reaches a response, it is escaped, not a 500."""
    from core.api.renderers import SafeJSONRenderer

    out = SafeJSONRenderer().render({"errors": {"prices.\ud800": ["caf\u00e9"]}, "status": 400})
    assert json.loads(out) == {"errors": {"prices.\ud800": ["caf\u00e9"]}, "status": 400}
    assert SafeJSONRenderer().render({"name": "caf\u00e9"}) == '{"name":"café"}'.encode()  # UTF-8 kept otherwise
