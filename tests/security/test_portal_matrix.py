"""Authorization matrix for the HTML portal: every portal page × method × subject gets what the policy says.

Pages are discovered from Django's URL resolver (every pattern under the portal and accounts URLconfs), so
a page added later is exercised automatically and fails ``test_every_portal_page_is_classified`` until it
is given a row in POLICY. Each page is sent GET and POST; a method the policy does not list must be
refused (405). The expected outcomes are written here from the role definitions (accounts/roles.py),
*not* read back from the views.

Subjects: anonymous; viewer / planner / finance / admin of the home team; an admin of another team; and a
user who is a *viewer* of the home team and an *admin* of the other team with the other team active in
the session. The portal (accounts/scoping.py) lets a session see every team it is a member of — the
active team only decides where *new* objects go — so that user may read home-team objects but not change
them (403), and whatever they create lands in the other team.

Each request runs in a savepoint that is rolled back, so every subject sees the same seeded world.

Expected outcomes
* anonymous: a redirect to /accounts/login/ for every page and method (the sign-in page itself answers,
  without data);
* a member whose role in the object's team lacks the capability: 403, database unchanged;
* a non-member addressing a home-team object (path, query string or form body): 404, database unchanged;
* listings (and the live estimate) for a non-member: 200 with nothing of the home team in the page;
* allowed: 200 for pages, a redirect (not to sign-in) for writes — and the write must really happen;
* creating pages act in the session's active team: allowed by the role there; never writes the home team
  when another team is active.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.db import transaction
from django.test import Client
from django.urls import URLResolver, get_resolver

from tests.security.endpoints import Endpoint, _readable, _walk
from tests.security.seed import World, seed_world

pytestmark = pytest.mark.django_db

PORTAL_URLCONFS = ("portal.urls", "accounts.urls")
METHODS = ("GET", "POST")

# --- the policy (from the role definitions, not from the code under test) -------------------------------
ROLE_CAPS: dict[str, frozenset[str]] = {
    "viewer": frozenset({"read"}),
    "planner": frozenset({"read", "plan", "export", "token"}),
    "finance": frozenset({"read", "export", "token"}),
    "admin": frozenset({"read", "plan", "export", "token", "catalog", "manage"}),
}
READ, PLAN, EXPORT, CATALOG, TOKEN = "read", "plan", "export", "catalog", "token"
AUTH = "authenticated"  # any signed-in user
PUBLIC = "public"  # no sign-in needed

# What a request addresses, which decides where the capability is checked:
LIST = "list"  # a listing / computation over the teams the user belongs to; a non-member sees nothing of home
OBJECT = "object"  # a home-team object (in the path, query or form): non-members 404, members need the cap
CREATE = "create"  # a new object in the session's active team: the role *there* needs the cap
FORK = "fork"  # reads a home-team object (non-members 404) and creates from it in the active team
SIGNIN = "signin"  # the sign-in page: anonymous users get the form, signed-in users are sent on
SIGNOUT = "signout"  # sign-out: everyone ends at the sign-in page
SWITCH = "switch"  # choose the active team: only a team the user is a member of
OWN = "own"  # the signed-in user's own object (an API token of the home admin): its owner only, anyone else 404


@dataclass(frozen=True)
class Rule:
    cap: str
    target: str
    query: str = ""  # appended to the URL; {catalog} {scenario} {run} {run2} {sweep} are home-team ids
    htmx: bool = False  # send HX-Request (the live partials)
    writes: bool = False  # an allowed request must change the database; a refused one must not


def R(cap: str, target: str, query: str = "", *, htmx: bool = False, writes: bool = False) -> Rule:
    return Rule(cap, target, query, htmx, writes)


# url name -> method -> probes. A method not listed must be refused with 405 (and change nothing).
POLICY: dict[str, dict[str, list[Rule]]] = {
    "dashboard": {"GET": [R(READ, LIST)]},
    "catalog": {"GET": [R(READ, LIST), R(READ, OBJECT, "?catalog={catalog}")]},
    "catalog-fork": {"POST": [R(CATALOG, FORK, writes=True)]},
    "fleets": {"GET": [R(READ, LIST)]},
    "fleet-new": {"GET": [R(PLAN, CREATE)], "POST": [R(PLAN, CREATE, writes=True)]},
    "fleet-edit": {"GET": [R(PLAN, OBJECT)], "POST": [R(PLAN, OBJECT, writes=True)]},
    # calibration page (issue #16): anyone in the team reads it; uploading / fitting needs plan
    "fleet-calibration": {"GET": [R(READ, OBJECT)], "POST": [R(PLAN, OBJECT, writes=True)]},
    "scenario-calibration": {"GET": [R(READ, OBJECT)], "POST": [R(PLAN, OBJECT, writes=True)]},
    "scenarios": {"GET": [R(READ, LIST)]},
    "scenario-new": {"GET": [R(PLAN, CREATE)], "POST": [R(PLAN, CREATE, writes=True)]},
    # The builder's live estimate of the posted input: saves nothing; names a home scenario and fleet.
    "scenario-preview": {"POST": [R(READ, LIST, htmx=True)]},
    "scenario-detail": {"GET": [R(READ, OBJECT)]},
    "scenario-edit": {"GET": [R(PLAN, OBJECT)], "POST": [R(PLAN, OBJECT, writes=True)]},
    "scenario-run": {"POST": [R(PLAN, OBJECT, writes=True)]},
    "scenario-sweep": {"POST": [R(PLAN, OBJECT, writes=True)]},
    "runs": {"GET": [R(READ, LIST), R(READ, LIST, "?scenario={scenario}"),
                     R(READ, LIST, "?partial=table", htmx=True)]},
    "run-detail": {"GET": [R(READ, OBJECT), R(READ, OBJECT, "?partial=status", htmx=True)]},
    "run-cancel": {"POST": [R(PLAN, OBJECT, writes=True)]},
    "run-explain": {"GET": [R(READ, OBJECT)]},
    "sweep-detail": {"GET": [R(READ, OBJECT), R(READ, OBJECT, "?partial=progress", htmx=True)]},
    "compare": {"GET": [R(READ, LIST), R(READ, OBJECT, "?runs={run},{run2}&baseline={run}"),
                        R(READ, OBJECT, "?sweep={sweep}")]},
    "compare-export": {"GET": [R(EXPORT, OBJECT, "?runs={run},{run2}&format=csv")]},
    "reports": {"GET": [R(READ, LIST)]},
    "report-new": {"POST": [R(PLAN, OBJECT, writes=True)]},
    "report-detail": {"GET": [R(READ, OBJECT)], "POST": [R(PLAN, OBJECT, writes=True)]},
    "reevaluations": {"GET": [R(READ, LIST)]},
    # issue #15: one run's figures + line items; the API token page (a user's own tokens; creating one acts in
    # the active team, or a team picked in the form, and needs the token capability there); revoking your own
    "run-export": {"GET": [R(EXPORT, OBJECT, "?format=csv")]},
    "tokens": {"GET": [R(AUTH, LIST)], "POST": [R(TOKEN, CREATE, writes=True)]},
    "token-revoke": {"POST": [R(AUTH, OWN, writes=True)]},
    # fabric studies: the form + the team's studies; POST names a home scenario in the body and queues a run
    "fabric": {"GET": [R(READ, LIST)], "POST": [R(PLAN, OBJECT, writes=True)]},
    "fabric-run": {"GET": [R(READ, OBJECT)]},
    "login": {"GET": [R(PUBLIC, SIGNIN)], "POST": [R(PUBLIC, SIGNIN)]},  # POST: a wrong password
    "logout": {"POST": [R(PUBLIC, SIGNOUT)]},
    "switch-team": {"POST": [R(AUTH, SWITCH)]},
    # the engine's accuracy on published runs: no team's data, the same page for every signed-in user
    "accuracy": {"GET": [R(AUTH, LIST)]},
}

# capacity plans (issue #14): the plans page lists the team's plans; running one needs plan; a run's page reads
POLICY.update({
    "capacity-plans": {"GET": [R(READ, LIST)]},
    "capacity-plan-run": {"POST": [R(PLAN, OBJECT, writes=True)]},
    "capacity-run": {"GET": [R(READ, OBJECT)]},
})

# fabric studies (issue #13): "Use for scenario" pins a home scenario (named in the body) to a finished study
POLICY.update({"fabric-run-pin": {"POST": [R(PLAN, OBJECT, writes=True)]}})

# first path segment -> the seeded home-team object a <pk> in that route addresses
PATH_OBJECT = {"catalog": "catalog", "fleets": "fleet", "scenarios": "scenario", "runs": "run",
               "sweeps": "sweep", "reports": "report", "tokens": "token"}
PATH_OBJECT_BY_NAME = {"run-cancel": "queued_run", "scenario-sweep": "adhoc", "fabric-run": "fabric_run"}  # a cancellable run; a cluster scenario
PATH_OBJECT_BY_NAME["fabric-run-pin"] = "fabric_study"  # issue #13: a finished study (extras)

PATH_OBJECT_BY_NAME.update({"capacity-plan-run": "capacity_plan", "capacity-run": "capacity_run"})

# the capacity-plan builder (new: the active team's plan capability; edit: the plan's team) and the plan comparison
POLICY.update({
    "capacity-plan-new": {"GET": [R(PLAN, CREATE)], "POST": [R(PLAN, CREATE, writes=True)]},
    "capacity-plan-edit": {"GET": [R(PLAN, OBJECT)], "POST": [R(PLAN, OBJECT, writes=True)]},
    "capacity-compare": {"GET": [R(READ, LIST), R(READ, OBJECT, "?plans={capacity_plan},{capacity_plan}"),
                                 R(READ, OBJECT, "?runs={capacity_run},{capacity_run}")]},
})
PATH_OBJECT_BY_NAME["capacity-plan-edit"] = "capacity_plan"
CAPACITY_POST = {"name": "matrix plan", "horizon_days": 30, "policy": "fifo", "failures": "", "arrivals": "",
                 "extra_clusters": '[{"name": "pod", "gpu": "A100-80GB", "gpus": 32, "nic_gbps": 200}]',
                 "candidates": "", "jobs-TOTAL_FORMS": "1", "jobs-INITIAL_FORMS": "0", "jobs-MIN_NUM_FORMS": "0",
                 "jobs-MAX_NUM_FORMS": "200", "jobs-0-name": "m-job", "jobs-0-gpus": "16",
                 "jobs-0-duration_days": "3", "jobs-0-submit_day": "0"}

FLEET_POST = {"name": "matrix fleet", "site": "IAD", "server_model": "HGX-H100", "server_count": 16,
              "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400, "fabric": "infiniband",
              "topology": "fat-tree", "oversubscription": 1.0, "in_service_date": "", "notes": ""}
BUILDER_POST: dict[str, Any] = {
    "name": "matrix scenario", "description": "", "preset": "llama3-8b", "model_name": "Llama-3-8B",
    "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "gated_ffn": "on",
    "vocab": 128256, "seq_len": 8192, "global_batch": 512, "tokens_b": 1000, "precision": "bf16",
    "recompute": "auto", "par_mode": "auto", "tp": "", "pp": "", "gpu": "H100-SXM", "gpus": 256,
    "gpus_per_node": 8, "nic_gbps": 400, "fabric": "infiniband", "topology": "rail-optimized",
    "oversubscription": 1.0, "usd_per_kwh": 0.08, "pue": 1.3, "depreciation_years": 4, "avg_utilization": 0.8,
}


# --- discovery ---------------------------------------------------------------------------------------------
def _urlconf_name(resolver: URLResolver) -> str:
    conf = resolver.urlconf_name
    return conf if isinstance(conf, str) else getattr(conf, "__name__", repr(conf))


def portal_pages() -> list[Endpoint]:
    """Every URL pattern of the portal and accounts URLconfs (as mounted in the root URLconf)."""
    found: dict[str, Endpoint] = {}
    mounted: set[str] = set()
    for top in get_resolver().url_patterns:
        if not isinstance(top, URLResolver) or _urlconf_name(top) not in PORTAL_URLCONFS:
            continue
        mounted.add(_urlconf_name(top))
        prefix = top.pattern.regex.pattern.lstrip("^")
        for regex, pattern in _walk(top.url_patterns, prefix):
            params = tuple(re.findall(r"\(\?P<(\w+)>", regex))
            ep = Endpoint(_readable(regex), regex, pattern.name, "ANY", None, pattern.callback, params)
            found.setdefault(ep.route, ep)
    assert mounted == set(PORTAL_URLCONFS), f"portal URLconfs not mounted: {set(PORTAL_URLCONFS) - mounted}"
    return sorted(found.values(), key=lambda e: e.route)


def page_key(page: Endpoint) -> str:
    return page.name or page.route


# --- subjects ---------------------------------------------------------------------------------------------
@dataclass
class Subject:
    name: str
    user: Any | None  # None: anonymous
    home_role: str | None  # membership role in the home team (None: not a member)
    active_role: str | None  # role in the session's active team (where new objects go)
    active_is_home: bool
    active_team_id: int | None = None  # set in the session when given
    client: Client = field(default_factory=Client)

    def login(self) -> None:
        self.client = Client()
        self.client.raise_request_exception = False
        if self.user is None:
            return
        self.client.force_login(self.user)
        if self.active_team_id is not None:
            from accounts.scoping import SESSION_TEAM_KEY

            session = self.client.session
            session[SESSION_TEAM_KEY] = self.active_team_id
            session.save()


@pytest.fixture
def world() -> World:
    return seed_world()


@pytest.fixture
def extras(world: World) -> dict[str, Any]:
    """Home-team objects the seed does not name: a queued (cancellable) run and the ad-hoc scenario."""
    from planning import services as planning
    from simulations import services
    from simulations.models import RunKind

    h = world.home
    adhoc = h.sweep.scenario
    doc, version, values = planning.scenario_resolve(scenario=adhoc)
    queued = services.run_create(team=h.team, user=h.users["admin"], kind=RunKind.PREDICT, document=doc,
                                 version=version, values=values, scenario=adhoc)
    run2 = h.report.runs.exclude(pk=h.run.pk).order_by("pk").first()
    from accounts.models import ApiToken

    token, _raw = ApiToken.issue(user=h.users["admin"], team=h.team, name="matrix token")
    fabric_run = services.run_create(team=h.team, user=h.users["admin"], kind=RunKind.FABRIC, document=doc,
                                     version=version, values=values, scenario=adhoc, params={"seeds": 1})
    # a finished fabric study to pin (its compact shares are all the pin reads; no simulation needed here)
    study = services.run_create(team=h.team, user=h.users["admin"], kind=RunKind.FABRIC, document=doc,
                                version=version, values=values, scenario=adhoc, params={"seeds": 2})
    row = {"label": "adaptive", "routing": "adaptive", "qps": 1, "p10": 0.9, "p50": 0.95, "p90": 1.0}
    type(study).objects.filter(pk=study.pk).update(status="succeeded", result={
        "kind": "fabric-study", "ranks": 64, "traffic": ["ring-allreduce"], "table": [row],
        "variants": [{"label": "adaptive", "result": {"inputs": {"placement": "packed", "seeds": 2}}}],
        "fabric": {"fabric": doc["cluster"].get("fabric", "infiniband"), "topology": "fat-tree", "gpus": 64}})
    return {"queued_run": queued, "adhoc": adhoc, "run2": run2, "fabric_run": fabric_run, "token": token,
            "fabric_study": study}


@pytest.fixture
def subjects(world: World) -> list[Subject]:
    from accounts.models import Membership, User

    home, other = world.home, world.other
    dual = User.objects.create_user(username="dual-member", password="x")
    Membership.objects.create(user=dual, team=home.team, role="viewer")
    Membership.objects.create(user=dual, team=other.team, role="admin")
    out = [
        Subject("anonymous", None, None, None, False),
        *(Subject(role, home.users[role], role, role, True) for role in ("viewer", "planner", "finance", "admin")),
        Subject("other-team-admin", other.users["admin"], None, "admin", False),
        Subject("dual(home viewer, other admin, other active)", dual, "viewer", "admin", False,
                active_team_id=other.team.pk),
    ]
    for s in out:
        s.login()
    return out


# --- requests ---------------------------------------------------------------------------------------------
def home_ids(world: World, extras: dict[str, Any]) -> dict[str, Any]:
    h = world.home
    objs = {"catalog": h.catalog, "fleet": h.fleet, "scenario": h.scenario, "run": h.run, "sweep": h.sweep,
            "report": h.report, **extras}
    if h.capacity_plan is not None:  # issue #14: the seeded plan and its finished fleet run
        from simulations.services.capacity_plans import plan_runs

        objs.update(capacity_plan=h.capacity_plan, capacity_run=plan_runs(h.capacity_plan).first())
    return {k: v.pk for k, v in objs.items()}


def post_body(name: str, world: World, ids: dict[str, Any]) -> dict[str, Any]:
    h = world.home
    bodies: dict[str, dict[str, Any]] = {
        "fleet-new": FLEET_POST,
        "fleet-edit": {**FLEET_POST, "name": "matrix fleet renamed", "server_count": 32},
        "fleet-calibration": {"action": "fit", "name": "matrix fit"},  # refits from the seeded calibration file
        "scenario-calibration": {"calibration_fleet": ""},  # opts the scenario out (checkbox absent)
        "scenario-new": BUILDER_POST,
        "scenario-edit": {**BUILDER_POST, "name": "matrix scenario renamed"},
        "scenario-preview": {**BUILDER_POST, "scenario_id": ids["scenario"], "fleet": ids["fleet"]},
        "scenario-run": {"kind": "predict", "force": "1"},
        "scenario-sweep": {"nic_gbps": ["200", "400"], "name": "matrix sweep"},
        "run-cancel": {"next": "/runs/"},
        "tokens": {"name": "matrix token", "expires": "30"},
        "fabric": {"scenario": ids["adhoc"], "traffic": "ring-allreduce", "routing": "compare",
                   "placement": "packed", "seeds": 1},
        "fabric-run-pin": {"scenario": ids["adhoc"]},
        "capacity-plan-new": CAPACITY_POST,
        "capacity-plan-edit": {**CAPACITY_POST, "name": "matrix plan renamed"},
        "report-new": {"runs": f"{ids['run']},{ids['run2']}", "baseline": ids["run"], "name": "matrix report"},
        "report-detail": {"name": "matrix report renamed"},
        "login": {"username": h.users["viewer"].username, "password": "not-the-password"},
        "switch-team": {"team": h.team.pk, "next": "/"},
    }
    return bodies.get(name, {})


def page_url(page: Endpoint, rule: Rule | None, ids: dict[str, Any]) -> str:
    if page.params:
        key = PATH_OBJECT_BY_NAME.get(page_key(page)) or PATH_OBJECT[page.route.split("/", 1)[0]]
        url = page.url(**dict.fromkeys(page.params, ids[key]))
    else:
        url = page.url()
    return url + (rule.query.format(**ids) if rule else "")


# --- expectations -----------------------------------------------------------------------------------------
def expected(rule: Rule | None, subject: Subject, caps: dict[str, frozenset[str]] = ROLE_CAPS,
             public_page: bool = False) -> str:
    """'login', '405', '404', '403', 'ok', 'ok-elsewhere' (allowed, in another team), 'no-home-data',
    'signin-form', 'signed-in', 'signout', 'switch'."""
    anonymous = subject.user is None
    if rule is None:  # the page does not take this method
        return "login" if anonymous and not public_page else "405"
    if rule.target == SIGNIN:
        return "signin-form" if anonymous else "signed-in"
    if rule.target == SIGNOUT:
        return "signout"
    if anonymous:
        return "login"
    if rule.target == OWN:  # the seeded token belongs to the home admin
        return "ok" if subject.home_role == "admin" and subject.active_is_home else "404"
    if rule.cap == AUTH:
        return "switch" if rule.target == SWITCH else "ok"
    home_caps = caps.get(subject.home_role or "", frozenset())
    active_caps = caps.get(subject.active_role or "", frozenset())
    if rule.target == LIST:
        if subject.home_role is None:
            return "no-home-data" if rule.cap in active_caps else "403"
        return "ok" if rule.cap in home_caps else "403"
    if rule.target == OBJECT:
        if subject.home_role is None:
            return "404"
        return "ok" if rule.cap in home_caps else "403"
    if rule.target == FORK and subject.home_role is None:
        return "404"
    if rule.target in (CREATE, FORK):
        if rule.cap not in active_caps:
            return "403"
        if rule.target == FORK and not subject.active_is_home and rule.cap not in home_caps:
            return "403"  # publishing a team catalog into another team needs the catalog capability at home (#11)
        return "ok" if subject.active_is_home else "ok-elsewhere"
    raise AssertionError(rule)


_STATE_MODELS: list[Any] = []


def _state_models() -> list[Any]:
    if not _STATE_MODELS:
        _STATE_MODELS.extend(m for m in apps.get_models() if m._meta.app_label in ("planning", "simulations", "accounts"))
    return _STATE_MODELS


def db_state() -> dict[str, tuple[int, int]]:
    """Per model: row count and a digest of every row — a refused request must leave both as they were
    (the digest catches in-place updates, which a row count alone would miss)."""
    out: dict[str, tuple[int, int]] = {}
    for m in _state_models():
        rows = list(m._base_manager.order_by("pk").values_list())
        out[m._meta.label] = (len(rows), hash(repr(rows)))
    return out


def home_counts(world: World) -> dict[str, int]:
    return {m._meta.label: m._base_manager.filter(team=world.home.team).count()
            for m in _state_models() if any(f.name == "team" for f in m._meta.fields)}


def _diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in a if a[k] != b.get(k))


@dataclass
class Case:
    id: str
    subject: str
    want: str
    status: int
    problem: str  # empty when the outcome matches the policy


def _check(want: str, rule: Rule | None, method: str, resp: Any, changed: list[str], home_changed: list[str],
           leaked: bool, subject: Subject, session_team: Any, world: World) -> str:
    code = resp.status_code
    location = resp.get("Location", "") if code in (301, 302, 303) else ""
    to_login = code == 302 and location.startswith(settings.LOGIN_URL)
    if code >= 500:
        return f"server error {code}"
    if leaked:
        return "home-team data in a page for a non-member"
    if want in ("405", "404", "403", "login"):
        problems = []
        if want == "login" and not to_login:
            problems.append("expected a redirect to the sign-in page")
        elif want != "login" and code != int(want):
            problems.append(f"expected {want}")
        if changed:
            problems.append(f"a refused request wrote {changed}")
        return "; ".join(problems)
    if want == "signin-form":
        return "" if code == 200 and not changed else "expected the sign-in form, nothing written"
    if want == "signed-in":
        return "" if code == 302 and not to_login and not changed else "expected a redirect away from sign-in"
    if want == "signout":
        return "" if to_login else "expected a redirect to the sign-in page"
    if want == "switch":
        if code != 302 or to_login:
            return "expected a redirect"
        member = subject.home_role is not None
        if member and session_team != world.home.team.pk:
            return "a member could not make the home team active"
        if not member and session_team == world.home.team.pk:
            return "a non-member made the home team their active team"
        return ""
    assert want in ("ok", "ok-elsewhere", "no-home-data"), want
    assert rule is not None
    if method == "GET" or not rule.writes:
        if code != 200:
            return "expected 200"
        return f"a read wrote {changed}" if changed else ""
    if code != 302 or to_login:
        return "expected a redirect after the write"
    if not changed:
        return "the allowed write changed nothing (is the probe body valid?)"
    if want == "ok-elsewhere" and home_changed:
        return f"wrote into the home team from another active team: {home_changed}"
    if want == "ok" and rule.target in (CREATE, FORK) and not home_changed:
        return "the new object did not land in the home team"
    return ""


def run_matrix(world: World, extras: dict[str, Any], subjects: list[Subject],
               caps: dict[str, frozenset[str]] = ROLE_CAPS) -> Iterator[Case]:
    from accounts.scoping import SESSION_TEAM_KEY

    ids = home_ids(world, extras)
    slug = world.home.team.slug
    for page in portal_pages():
        name = page_key(page)
        methods = POLICY.get(name)
        if methods is None:
            continue  # reported by test_every_portal_page_is_classified
        public_page = all(r.cap == PUBLIC for rs in methods.values() for r in rs)
        for method in METHODS:
            rules: list[Rule | None] = list(methods.get(method) or [None])
            for rule in rules:
                url = page_url(page, rule, ids)
                body = post_body(name, world, ids) if method == "POST" else None
                extra = {"HTTP_HX_REQUEST": "true"} if rule is not None and rule.htmx else {}
                for subject in subjects:
                    want = expected(rule, subject, caps, public_page)
                    with transaction.atomic():
                        before, home_before = db_state(), home_counts(world)
                        if method == "GET":
                            resp = subject.client.get(url, **extra)
                        else:
                            resp = subject.client.post(url, body, **extra)
                        after, home_after = db_state(), home_counts(world)
                        session_team = (subject.client.session.get(SESSION_TEAM_KEY)
                                        if want == "switch" else None)
                        content = b"" if resp.streaming else resp.content
                        echoed = content  # a form may show the user's own input again: that is no leak
                        for value in (body or {}).values():
                            if isinstance(value, str) and value:
                                echoed = echoed.replace(value.encode(), b"")
                        leaked = subject.home_role is None and slug.encode() in echoed
                        problem = _check(want, rule, method, resp, _diff(before, after), _diff(home_before, home_after),
                                         leaked, subject, session_team, world)
                        transaction.set_rollback(True)
                    if want == "signout":
                        subject.login()  # the client's session cookie is gone; sign in again
                    yield Case(f"{method} {url}", subject.name, want, resp.status_code,
                               problem and f"{problem}: {content[:160]!r}")


# --- tests ------------------------------------------------------------------------------------------------
def test_every_portal_page_is_classified() -> None:
    pages = portal_pages()
    assert len(pages) >= 26, [p.route for p in pages]
    missing = sorted(f"/{p.route} (name {p.name!r})" for p in pages if page_key(p) not in POLICY)
    assert not missing, "classify these portal pages in POLICY:\n" + "\n".join(missing)
    stale = sorted(set(POLICY) - {page_key(p) for p in pages})
    assert not stale, f"POLICY rows for pages that no longer exist: {stale}"
    bad = sorted(f"{k} {m}" for k, ms in POLICY.items() for m in ms if m not in METHODS)
    assert not bad, f"the matrix sends only {METHODS}: {bad}"


def test_portal_authorization_matrix(world, extras, subjects) -> None:
    cases = list(run_matrix(world, extras, subjects))
    failures = [c for c in cases if c.problem]
    report = "\n".join(f"{c.id:60s} {c.subject:46s} want {c.want:13s} got {c.status}: {c.problem}" for c in failures)
    n_probes = sum(max(1, len(POLICY[page_key(p)].get(m, []))) for p in portal_pages() for m in METHODS)
    assert len(cases) == n_probes * len(subjects)
    assert not failures, f"{len(failures)} of {len(cases)} portal authorization cases wrong:\n{report}"


def test_members_see_home_data_so_the_leak_check_means_something(world, subjects) -> None:
    """The non-member leak check looks for the home team's slug: members do see it on the listings."""
    slug = world.home.team.slug.encode()
    viewer = next(s for s in subjects if s.name == "viewer")
    for url in ("/", "/fleets/", "/scenarios/", "/runs/", "/reports/", f"/catalog/?catalog={world.home.catalog.pk}"):
        resp = viewer.client.get(url)
        assert resp.status_code == 200 and slug in resp.content, url


def test_matrix_catches_a_broken_rule(world, extras, subjects) -> None:
    """Give viewers 'plan' in the policy: the matrix must now report the portal's (correct) refusals."""
    broken = {**ROLE_CAPS, "viewer": ROLE_CAPS["viewer"] | {"plan"}}
    viewer = [s for s in subjects if s.name == "viewer"]
    failures = [c for c in run_matrix(world, extras, viewer, broken) if c.problem]
    planning_pages = {"fleet-new", "fleet-edit", "scenario-new", "scenario-edit", "scenario-run", "scenario-sweep",
                      "run-cancel", "report-new", "report-detail"}
    assert failures and all(c.want == "ok" and c.status == 403 for c in failures), failures
    assert len(failures) >= len(planning_pages) + 4, [c.id for c in failures]


def test_active_team_without_the_capability_is_not_bypassed(world, extras) -> None:
    """Planner of home, viewer of other, other active: creating must be refused, not redirected to home."""
    from accounts.models import Membership, User

    user = User.objects.create_user(username="dual-planner", password="x")
    Membership.objects.create(user=user, team=world.home.team, role="planner")
    Membership.objects.create(user=user, team=world.other.team, role="viewer")
    subject = Subject("dual(home planner, other viewer, other active)", user, "planner", "viewer", False,
                      active_team_id=world.other.team.pk)
    subject.login()
    failures = [c for c in run_matrix(world, extras, [subject]) if c.problem]
    assert not failures, "\n".join(f"{c.id} want {c.want} got {c.status}: {c.problem}" for c in failures)


@pytest.mark.parametrize("url", ["/runs/?scenario=abc", "/compare/?sweep=abc"])
def test_non_numeric_ids_are_404_not_500(world, url) -> None:
    from django.test import Client

    client = Client(raise_request_exception=False)
    client.force_login(world.home.users["admin"])
    assert client.get(url).status_code == 404


def test_team_switch_with_garbage_is_refused_not_500(world) -> None:
    from django.test import Client

    client = Client(raise_request_exception=False)
    client.force_login(world.home.users["admin"])
    for value in ("abc", ""):
        resp = client.post("/accounts/team/", {"team": value, "next": "/"})
        assert resp.status_code == 302
