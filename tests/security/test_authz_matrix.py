"""Authorization matrix: every API endpoint × method × subject gets exactly the status the policy says.

Endpoints come from Django's URL resolver (tests/security/endpoints.py), so a new route is exercised
automatically; it must also be classified in POLICY below (``test_every_endpoint_is_classified``) — the
policy is written here from the role definitions (accounts/roles.py docstring), *not* read back from the
views, so a view that forgets its capability check fails this test.

Subjects: anonymous, a revoked token, viewer / planner / finance / admin of the home team (session), the
home admin through a token, an admin of another team, and a user who is admin of *both* teams but uses a
token bound to the other team (tokens are confined to their team). Each request runs in a savepoint
that is rolled back, so every subject sees the same seeded world.

Expected statuses
* anonymous / revoked token: 401;
* role lacks the capability: 403 (no data changes);
* outsider on a home-team object (detail route): 404 — existence is not leaked;
* outsider on a list route: 200 but no home-team object in the results;
* role has the capability: 2xx, or a 400/409 validation answer when the probe body is not a valid
  payload (the permission check has passed) — never 401/403/404/405/5xx.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from tests.security.endpoints import Endpoint, api_endpoints
from tests.security.seed import CAPACITY_PLAN, World, document, seed_world

pytestmark = pytest.mark.django_db

# --- the policy (from the role definitions, not from the code under test) -------------------------------
ROLE_CAPS = {
    "viewer": {"read"},
    "planner": {"read", "plan", "export", "token"},
    "finance": {"read", "export", "token"},
    "admin": {"read", "plan", "export", "token", "catalog", "manage"},
}
AUTH = "authenticated"  # any signed-in user, whatever their team role (their own account data)
OWNER = "owner"  # only the user the object belongs to (API tokens); anyone else gets 404
CSV_BODIES = {
    ("catalogs", "import_items"): "key,kind,name,unit_price_usd,power_w\nMX-1,gpu,Matrix GPU,1000,700\n",
    ("fleets", "import_fleets"): "name,server_model,server_count\nmatrix-fleet,HGX-H100,2\n",
    ("capacity-plans", "import_jobs"): "name,gpus,duration_days,submit_day,deadline_day\nm-job,16,3,0,9\n",
}

# (resource, action) -> capability needed in the object's team.
POLICY: dict[tuple[str, str | None], str] = {
    ("", None): AUTH,  # API root
    ("me", None): AUTH, ("me", "list"): AUTH,
    ("accuracy", None): AUTH,  # the engine's accuracy on published runs: no team's data
    ("tokens", "list"): AUTH, ("tokens", "retrieve"): OWNER, ("tokens", "destroy"): OWNER,
    ("tokens", "create"): "token",
    ("teams", "list"): "read", ("teams", "retrieve"): "read", ("teams", "members:GET"): "read",
    ("teams", "members:POST"): "manage", ("teams", "webhook:GET"): "manage", ("teams", "webhook:PUT"): "manage",
    ("preview", None): "read",
    ("changes", "list"): "read", ("changes", "retrieve"): "read",
    ("reevaluations", "list"): "read", ("reevaluations", "retrieve"): "read",
}
for res in ("catalogs", "catalog-items", "catalog-versions"):
    POLICY.update({(res, "list"): "read", (res, "retrieve"): "read"})
    POLICY.update({(res, a): "catalog" for a in ("create", "update", "partial_update", "destroy")})
POLICY.update({("catalogs", "versions"): "read", ("catalogs", "fork"): "catalog", ("catalogs", "import_items"): "catalog",
               ("catalog-versions", "items"): "read"})
for res in ("fleets", "workloads", "scenarios", "reports"):
    POLICY.update({(res, "list"): "read", (res, "retrieve"): "read"})
    POLICY.update({(res, a): "plan" for a in ("create", "update", "partial_update", "destroy")})
POLICY.update({
    ("fleets", "import_fleets"): "plan",
    ("scenarios", "document"): "read", ("scenarios", "run"): "plan", ("scenarios", "sweep"): "plan",
    ("runs", "list"): "read", ("runs", "retrieve"): "read", ("runs", "result"): "read",
    ("runs", "events"): "read",
    ("runs", "create"): "plan", ("runs", "cancel"): "plan", ("runs", "export"): "export",
    ("sweeps", "list"): "read", ("sweeps", "retrieve"): "read", ("sweeps", "create"): "plan",
    ("sweeps", "cancel"): "plan",
    ("reports", "compare"): "read", ("reports", "table"): "read", ("reports", "export"): "export",
    # calibration (issue #16): files and profiles belong to the fleet's team; profiles are immutable
    ("calibration-files", "list"): "read", ("calibration-files", "retrieve"): "read",
    ("calibration-files", "create"): "plan", ("calibration-files", "destroy"): "plan",
    ("calibration-files", "batch"): "plan",  # several files / a manifest at once (issue #24)
    ("calibration-profiles", "list"): "read", ("calibration-profiles", "retrieve"): "read",
    ("calibration-profiles", "create"): "plan",
    # capacity plans (issue #14): team-owned planning objects; runs go through the run machinery
    ("capacity-plans", "list"): "read", ("capacity-plans", "retrieve"): "read", ("capacity-plans", "runs"): "read",
    ("capacity-plans", "create"): "plan", ("capacity-plans", "update"): "plan",
    ("capacity-plans", "partial_update"): "plan", ("capacity-plans", "destroy"): "plan",
    ("capacity-plans", "run"): "plan", ("capacity-plans", "quarters"): "export",
    ("capacity-plans", "replicate"): "plan", ("capacity-plans", "replications"): "read",
    ("capacity-plans", "import_jobs"): "plan",
    ("capacity-plans", "compare"): "read",  # two plans (their latest runs) or two plan runs side by side
})

# resource -> the seeded home-team object a detail route addresses
RESOURCE_OBJECT = {
    "catalogs": "catalog", "catalog-versions": "catalog_version", "catalog-items": "catalog_item",
    "fleets": "fleet", "workloads": "workload", "scenarios": "scenario", "runs": "run", "sweeps": "sweep",
    "reports": "report", "reevaluations": "reevaluation", "teams": "team", "tokens": "token", "changes": "change",
    "calibration-files": "calibration_file", "calibration-profiles": "calibration_profile",
    "capacity-plans": "capacity_plan",
}


def policy_key(ep: Endpoint) -> tuple[str, str | None]:
    if (ep.resource, f"{ep.action}:{ep.method}") in POLICY:
        return ep.resource, f"{ep.action}:{ep.method}"
    return ep.resource, ep.action


# --- subjects ---------------------------------------------------------------------------------------------
@dataclass
class Subject:
    name: str
    client: APIClient
    role: str | None  # role in the home team; None = not a member (outsider) or unauthenticated
    authenticated: bool = True


def _session(user: Any) -> APIClient:
    c = APIClient()
    c.force_login(user)
    c.raise_request_exception = False
    return c


def _token(raw: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    c.raise_request_exception = False
    return c


@pytest.fixture
def world() -> World:
    return seed_world()


@pytest.fixture
def subjects(world: World) -> list[Subject]:
    from accounts.models import ApiToken, Membership, User

    home = world.home
    revoked, revoked_raw = ApiToken.issue(user=home.users["admin"], team=home.team, name="revoked")
    revoked.revoke()
    _, admin_raw = ApiToken.issue(user=home.users["admin"], team=home.team, name="admin-token")
    dual = User.objects.create_user(username="dual-admin", password="x")
    Membership.objects.create(user=dual, team=home.team, role="admin")
    Membership.objects.create(user=dual, team=world.other.team, role="admin")
    _, dual_raw = ApiToken.issue(user=dual, team=world.other.team, name="other-team-token")
    anon = APIClient()
    anon.raise_request_exception = False
    out = [
        Subject("anonymous", anon, None, authenticated=False),
        Subject("revoked-token", _token(revoked_raw), None, authenticated=False),
        *(Subject(role, _session(home.users[role]), role) for role in ("viewer", "planner", "finance", "admin")),
        Subject("admin-token", _token(admin_raw), "admin"),
        Subject("other-team-admin", _session(world.other.users["admin"]), None),
        Subject("dual-admin-with-other-team-token", _token(dual_raw), None),
    ]
    return out


# --- building requests -------------------------------------------------------------------------------------
def home_objects(world: World) -> dict[str, Any]:
    from accounts.models import ApiToken
    from planning.models import ObjectChange

    h = world.home
    version = h.catalog.latest_version()
    return {
        "catalog": h.catalog, "catalog_version": version, "catalog_item": version.items.order_by("pk").first(),
        "fleet": h.fleet, "workload": h.workload, "scenario": h.scenario, "run": h.run, "sweep": h.sweep,
        "report": h.report, "reevaluation": h.reevaluation, "team": h.team,
        "token": ApiToken.objects.filter(user=h.users["admin"], name="admin-token").first(),
        "change": ObjectChange.objects.filter(team=h.team).order_by("pk").first(),
        "calibration_file": h.calibration_file, "calibration_profile": h.calibration_profile,
        "capacity_plan": h.capacity_plan,
    }


def probe_request(ep: Endpoint, world: World, objs: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """(url, json body) for one endpoint, addressing home-team objects."""
    h = world.home
    url = ep.url(pk=objs[RESOURCE_OBJECT[ep.resource]].pk) if ep.is_detail else ep.url()
    body: dict[str, Any] | None = None
    if ep.resource == "reports" and ep.action == "compare":
        url += f"?runs={h.run.pk},{h.sweep.runs.order_by('pk').first().pk}&baseline={h.run.pk}"
    if ep.resource == "capacity-plans" and ep.action == "compare":
        url += f"?plans={h.capacity_plan.pk},{h.capacity_plan.pk}"
    if ep.method in ("POST", "PUT", "PATCH"):
        body = {}
        key = (ep.resource, ep.action)
        if key == ("preview", None):
            body = {"scenario": h.scenario.pk}
        elif key == ("scenarios", "run"):
            body = {"kind": "predict", "force": True}
        elif key == ("tokens", "create"):
            body = {"name": "matrix"}
        elif key == ("teams", "members"):
            body = {"user": h.users["viewer"].username, "role": "viewer"}
        elif key == ("teams", "webhook"):
            body = {"url": "https://hooks.example.com/matrix"}
        elif key == ("fleets", "create"):
            body = {"name": "m-fleet", "server_model": "HGX-H100", "server_count": 2}
        elif key == ("workloads", "create"):
            body = {"name": "m-wl", "model": document()["model"], "training": document()["training"]}
        elif key == ("runs", "create"):
            body = {"scenario": h.scenario.pk, "kind": "predict", "force": True}
        elif key in (("fleets", "partial_update"), ("workloads", "partial_update"), ("scenarios", "partial_update"),
                     ("reports", "partial_update"), ("catalogs", "partial_update")):
            body = {"description": "patched"} if ep.resource != "fleets" else {"notes": "patched"}
        elif key == ("catalogs", "fork"):
            body = {"name": "m-fork"}
        elif key == ("catalogs", "create"):
            body = {"name": "m-catalog"}
        elif key == ("calibration-files", "create"):
            body = {"fleet": h.fleet.pk, "kind": "nccl-tests", "content": h.calibration_file.content}
        elif key == ("calibration-files", "batch"):
            body = {"__files__": {"fleet": h.fleet.pk, "kind": "nccl-tests"},
                    "files": [h.calibration_file.content, h.calibration_file.content]}
        elif key == ("calibration-profiles", "create"):
            body = {"fleet": h.fleet.pk, "name": "matrix fit"}
        elif key == ("capacity-plans", "create"):
            body = {"name": "m-plan", "document": copy.deepcopy(CAPACITY_PLAN)}
        elif key in (("capacity-plans", "update"), ("capacity-plans", "partial_update")):
            body = {"name": "m-plan", "description": "patched", "document": copy.deepcopy(CAPACITY_PLAN)}
        elif key == ("capacity-plans", "run"):
            body = {"params": {"replications": 1}, "force": True}
        elif key == ("capacity-plans", "replicate"):
            body = {"replications": 2, "chunk": 1}
        elif key in CSV_BODIES:
            body = {"__csv__": CSV_BODIES[key]}
    return url, body


def send(client: APIClient, method: str, url: str, body: dict[str, Any] | None) -> Any:
    if body is None:
        return client.generic(method, url)
    if "__csv__" in body:
        from django.core.files.uploadedfile import SimpleUploadedFile

        upload = SimpleUploadedFile("data.csv", body["__csv__"].encode(), content_type="text/csv")
        return client.post(url, {"file": upload}, format="multipart")
    if "__files__" in body:  # a multipart form with several files (calibration-files/batch)
        from django.core.files.uploadedfile import SimpleUploadedFile

        parts = [SimpleUploadedFile(f"f{i}.txt", text.encode()) for i, text in enumerate(body["files"])]
        return client.post(url, {**body["__files__"], "files": parts}, format="multipart")
    return client.generic(method, url, json.dumps(body), content_type="application/json")


def expected(ep: Endpoint, subject: Subject) -> str:
    """'401', '403', '404', 'no-home-data' or 'allowed'."""
    if not subject.authenticated:
        return "401"
    cap = POLICY.get(policy_key(ep))
    assert cap is not None, f"{ep.id} is not classified in POLICY"
    if cap == AUTH:
        return "allowed"
    if cap == OWNER:
        return "allowed" if subject.name in ("admin", "admin-token") else "404"
    if subject.role is None:  # an outsider: member (admin) of another team only, as far as this request goes
        if ep.is_detail:
            return "404"
        if ep.method == "GET" or (ep.resource, ep.action) in (("preview", None),):
            return "no-home-data"
        return "allowed-elsewhere"  # creating in their own team is fine; checked: nothing lands in home
    return "allowed" if cap in ROLE_CAPS[subject.role] else "403"


def _ids(payload: Any) -> set[int]:
    if isinstance(payload, dict) and "results" in payload:
        payload = payload["results"]
    if isinstance(payload, list):
        return {r["id"] for r in payload if isinstance(r, dict) and isinstance(r.get("id"), int)}
    return set()


@dataclass
class Case:
    ep: Endpoint
    subject: Subject
    want: str
    status: int
    body: str


def run_matrix(world: World, subjects: list[Subject]) -> Iterator[Case]:
    objs = home_objects(world)
    for ep in api_endpoints():
        if POLICY.get(policy_key(ep)) is None:
            continue  # reported by test_every_endpoint_is_classified
        url, body = probe_request(ep, world, objs)
        for subject in subjects:
            want = expected(ep, subject)
            with transaction.atomic():
                before = _home_counts(world) if want == "allowed-elsewhere" else None
                resp = send(subject.client, ep.method, url, body)
                text = resp.content.decode("utf-8", "replace")[:400]
                status = resp.status_code
                if want == "no-home-data" and status == 200 and ep.method == "GET":
                    leaked = _ids(resp.json()) & _home_ids_for(ep, objs)
                    if leaked:
                        status, text = -1, f"LEAKED home ids {sorted(leaked)}: {text}"
                if before is not None and _home_counts(world) != before:
                    status, text = -1, f"outsider wrote into the home team: {text}"
                transaction.set_rollback(True)
            yield Case(ep, subject, want, status, text)


def _home_counts(world: World) -> dict[str, int]:
    from django.apps import apps

    return {
        m._meta.label: m._default_manager.filter(team=world.home.team).count()
        for m in apps.get_models()
        if m._meta.app_label in ("planning", "simulations") and any(f.name == "team" for f in m._meta.fields)
    }


def _home_ids_for(ep: Endpoint, objs: dict[str, Any]) -> set[int]:
    key = RESOURCE_OBJECT.get(ep.resource)
    obj = objs.get(key) if key else None
    if obj is None or ep.resource in ("tokens",):
        return set()
    model = type(obj)
    from accounts.models import Team

    if model is Team:
        return {obj.pk}
    team_field = {"CatalogVersion": "catalog__team", "CatalogItem": "version__catalog__team"}.get(model.__name__, "team")
    return set(model._default_manager.filter(**{team_field: objs["team"]}).values_list("pk", flat=True))


def ok(case: Case) -> bool:
    code, want = case.status, case.want
    if code == -1 or code >= 500:
        return False
    if want in ("401", "403", "404"):
        return code == int(want)
    if want == "no-home-data":
        # Lists answer 200 without home objects; actions naming home objects answer 400 "not found".
        return code in (200, 400) if case.ep.method == "GET" or case.ep.resource == "preview" else code == 400
    if want in ("allowed", "allowed-elsewhere"):
        return code not in (401, 403, 404, 405) and (code < 300 or code in (400, 409))
    raise AssertionError(want)


def test_every_endpoint_is_classified() -> None:
    missing = sorted({ep.id + f"  -> add {policy_key(ep)!r}" for ep in api_endpoints() if policy_key(ep) not in POLICY})
    assert not missing, "classify these endpoints in POLICY:\n" + "\n".join(missing)


def test_authorization_matrix(world, subjects) -> None:
    cases = list(run_matrix(world, subjects))
    failures = [c for c in cases if not ok(c)]
    report = "\n".join(
        f"{c.ep.id:55s} {c.subject.name:34s} want {c.want:18s} got {c.status}: {c.body[:160]}" for c in failures
    )
    assert len(cases) >= 8 * len({(e.route, e.method) for e in api_endpoints()}) - 8
    assert not failures, f"{len(failures)} of {len(cases)} authorization cases wrong:\n{report}"


def test_viewer_and_finance_cannot_change_anything(world, subjects) -> None:
    """Belt and braces on top of the status codes: denied writes leave every table as it was."""
    from django.apps import apps

    def counts() -> dict[str, int]:
        return {m._meta.label: m._default_manager.count() for m in apps.get_models()
                if m._meta.app_label in ("planning", "simulations", "accounts")}

    objs = home_objects(world)
    before = counts()
    for subject in [s for s in subjects if s.name in ("viewer", "finance")]:
        for ep in api_endpoints():
            cap = POLICY.get(policy_key(ep))
            if ep.method == "GET" or cap in (None, AUTH) or expected(ep, subject) == "allowed":
                continue
            url, body = probe_request(ep, world, objs)
            resp = send(subject.client, ep.method, url, body)
            assert resp.status_code == int(expected(ep, subject)), (subject.name, ep.id, resp.status_code, resp.content[:200])
    assert counts() == before


def test_global_catalog_is_read_only_for_everyone(world) -> None:
    from planning.models import CatalogVersion

    admin = _session(world.home.users["admin"])
    cat = world.global_catalog
    versions = CatalogVersion.objects.filter(catalog=cat).count()
    assert admin.get(f"/api/v1/catalogs/{cat.pk}/").status_code == 200
    for method, url, body in [
        ("PATCH", f"/api/v1/catalogs/{cat.pk}/", {"name": "mine now"}),
        ("DELETE", f"/api/v1/catalogs/{cat.pk}/", None),
        ("POST", "/api/v1/catalog-items/", {"catalog": cat.pk, "key": "X", "kind": "gpu", "name": "X"}),
        ("PATCH", f"/api/v1/catalog-items/{cat.latest_version().items.first().pk}/", {"unit_price_usd": 1}),
        ("DELETE", f"/api/v1/catalog-versions/{cat.latest_version().pk}/", None),
    ]:
        resp = send(admin, method, url, body)
        assert resp.status_code in (400, 403), (method, url, resp.status_code, resp.content[:200])
    cat.refresh_from_db()
    assert cat.name != "mine now" and cat.team_id is None
    assert CatalogVersion.objects.filter(catalog=cat).count() == versions
    # ...but any team admin may fork it into their own team.
    resp = send(admin, "POST", f"/api/v1/catalogs/{cat.pk}/fork/", {"name": "our prices"})
    assert resp.status_code == 201 and resp.json().get("team") in (world.home.team.slug, world.home.team.pk)


def test_cross_team_references_in_bodies_are_not_found(world) -> None:
    """Writing a home object that points at another team's objects is refused as 'not found'."""
    h, o = world.home, world.other
    planner = _session(h.users["planner"])
    attempts = [
        ("POST", "/api/v1/scenarios/", {"name": "x", "workload": o.workload.pk, "cluster": document()["cluster"]}),
        ("PATCH", f"/api/v1/scenarios/{h.scenario.pk}/", {"fleet": o.fleet.pk}),
        ("PATCH", f"/api/v1/scenarios/{h.scenario.pk}/", {"catalog": o.catalog.pk}),
        ("POST", "/api/v1/runs/", {"scenario": o.scenario.pk, "kind": "predict"}),
        ("POST", "/api/v1/sweeps/", {"scenario": o.scenario.pk, "axes": {"cluster.nic_gbps": [400]}}),
        ("POST", "/api/v1/reports/", {"name": "r", "runs": [o.run.pk], "baseline": o.run.pk}),
        ("POST", "/api/v1/preview/", {"scenario": o.scenario.pk}),
        ("POST", "/api/v1/preview/", {"document": document(), "catalog_version": o.catalog.latest_version().pk}),
        ("GET", f"/api/v1/reports/compare/?runs={o.run.pk}", None),
        ("GET", f"/api/v1/reports/compare/?runs={h.run.pk}&baseline={o.run.pk}", None),
    ]
    for method, url, body in attempts:
        resp = send(planner, method, url, body)
        assert resp.status_code == 400, (method, url, resp.status_code, resp.content[:300])
        assert "not found" in resp.content.decode().lower() or "does not exist" in resp.content.decode().lower()
    h.scenario.refresh_from_db()
    assert h.scenario.fleet_id == h.fleet.pk and h.scenario.catalog_id == h.catalog.pk


def test_filters_cannot_reach_other_teams(world) -> None:
    """Query-string filters naming another team's objects return nothing of theirs."""
    h, o = world.home, world.other
    c = _session(h.users["admin"])
    probes = {
        f"/api/v1/runs/?scenario={o.scenario.pk}": set(),
        f"/api/v1/runs/?input_hash={o.run.input_hash}": set(),
        f"/api/v1/sweeps/?scenario={o.scenario.pk}": set(),
        f"/api/v1/catalog-items/?catalog={o.catalog.pk}": set(),
        f"/api/v1/catalog-versions/?catalog={o.catalog.pk}": set(),
        f"/api/v1/changes/?object_type=scenario&object_id={o.scenario.pk}": set(),
        f"/api/v1/reevaluations/?scenario={o.scenario.pk}": set(),
        f"/api/v1/scenarios/?search={o.scenario.name}": set(),
    }
    for url in probes:
        resp = c.get(url)
        assert resp.status_code in (200, 400), (url, resp.status_code)
        if resp.status_code == 200:
            assert resp.json()["results"] == [] or all(
                r.get("team") in (None, h.team.slug, h.team.pk) for r in resp.json()["results"]
            ), (url, resp.json()["results"][:2])
