"""Portal/API hardening: CSRF on session writes, security headers + CSP, rate limits, tokens at rest.

``manage.py check --deploy`` in production mode is covered by tests/planner/test_settings_env.py (not repeated
here); this file checks what a browser actually receives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _cache_table(db):
    """The DB cache backend (no REDIS_URL) needs its table; harmless when it already exists."""
    from django.conf import settings
    from django.core.management import call_command

    if "DatabaseCache" in settings.CACHES["default"]["BACKEND"]:
        call_command("createcachetable", verbosity=0)


# --- CSRF -------------------------------------------------------------------------------------------------
def test_login_form_requires_csrf_token(make_user) -> None:
    make_user("viewer", username="csrf-alice")
    client = Client(enforce_csrf_checks=True)
    resp = client.post("/accounts/login/", {"username": "csrf-alice", "password": "pw-csrf-alice"})
    assert resp.status_code == 403
    assert "_auth_user_id" not in client.session

    # The same post with the token from the form succeeds: the check is what refused it above.
    page = client.get("/accounts/login/")
    token = page.cookies["csrftoken"].value
    resp = client.post(
        "/accounts/login/",
        {"username": "csrf-alice", "password": "pw-csrf-alice", "csrfmiddlewaretoken": token},
    )
    assert resp.status_code == 302


def test_session_api_writes_require_csrf(make_user) -> None:
    from accounts.models import ApiToken

    user = make_user("planner")
    client = Client(enforce_csrf_checks=True)
    client.get("/accounts/login/")  # anonymous: the sign-in form sets the csrftoken cookie
    client.force_login(user)
    resp = client.post("/api/v1/tokens/", json.dumps({"name": "x"}), content_type="application/json")
    assert resp.status_code == 403, resp.content
    assert "CSRF" in resp.content.decode()
    assert not ApiToken.objects.filter(user=user).exists()

    token = client.cookies["csrftoken"].value
    resp = client.post(
        "/api/v1/tokens/", json.dumps({"name": "x"}), content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert resp.status_code == 201, resp.content


def test_portal_posts_require_csrf(make_user) -> None:
    user = make_user("planner")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/accounts/team/", {"team": user.test_team.pk}).status_code == 403
    # Logout is POST-only (a GET from an <img> cannot sign anyone out) and needs the token too.
    assert client.get("/accounts/logout/").status_code == 405
    assert client.post("/accounts/logout/").status_code == 403
    assert "_auth_user_id" in client.session


def test_open_redirect_refused_by_team_switcher(make_user) -> None:
    user = make_user("planner")
    client = Client()
    client.force_login(user)
    resp = client.post("/accounts/team/", {"team": user.test_team.pk, "next": "https://evil.example/"})
    assert resp.status_code == 302
    assert resp["Location"] == "/"


# --- headers --------------------------------------------------------------------------------------------
def _csp_directives(header: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


@pytest.mark.parametrize(
    "path,signed_in",
    [("/accounts/login/", False), ("/", True), ("/api/v1/me/", True), ("/api/v1/teams/", True),
     ("/healthz", False), ("/api/schema/", False), ("/api/docs/", True)],
)
def test_security_headers_and_csp(path, signed_in, make_user) -> None:
    client = Client()
    if signed_in:
        client.force_login(make_user("viewer"))
    resp = client.get(path)
    assert resp.status_code == 200, (path, resp.status_code)
    assert resp["X-Frame-Options"] == "DENY"
    assert resp["X-Content-Type-Options"] == "nosniff"
    assert resp["Referrer-Policy"] == "same-origin"
    if path != "/api/docs/":  # Swagger UI deliberately relaxes COOP for its OAuth pop-up
        assert resp["Cross-Origin-Opener-Policy"] == "same-origin"
    csp = resp.get("Content-Security-Policy")
    assert csp, f"{path}: no Content-Security-Policy"
    d = _csp_directives(csp)
    assert d["default-src"] == ["'self'"]
    assert d["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in d.get("script-src", d["default-src"])
    assert "'unsafe-eval'" not in d.get("script-src", d["default-src"])
    assert all("*" not in source for sources in d.values() for source in sources)
    assert d.get("form-action") == ["'self'"]
    assert d.get("base-uri") == ["'self'"]


def test_api_docs_page_works_under_the_csp(make_user) -> None:
    """Every script the docs page loads must be allowed by our CSP (script-src 'self'): same-origin
    files, no inline code, no third-party CDN (``@latest`` from a CDN is also a supply-chain risk)."""
    import re

    client = Client()
    client.force_login(make_user("viewer"))
    html = client.get("/api/docs/").content.decode()
    tags = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.S)
    assert tags
    for attrs, body in tags:
        src = re.search(r'src="([^"]*)"', attrs)
        assert src is not None and not body.strip(), f"inline <script> is blocked by script-src 'self': {body[:80]!r}"
        assert src.group(1).startswith("/") and not src.group(1).startswith("//"), f"off-origin script {src.group(1)}"
    for href in re.findall(r'<link[^>]*href="([^"]*)"', html):
        assert href.startswith(("/", "data:")) and not href.startswith("//"), f"off-origin resource {href}"


def test_session_cookie_is_httponly_and_samesite(make_user) -> None:
    make_user("viewer", username="cookie-bob")
    client = Client()
    resp = client.post("/accounts/login/", {"username": "cookie-bob", "password": "pw-cookie-bob"})
    assert resp.status_code == 302
    morsel = resp.cookies["sessionid"]
    assert morsel["httponly"]
    assert morsel["samesite"].lower() in ("lax", "strict")


def test_production_headers_hsts_secure_cookies_and_https_redirect() -> None:
    """Production mode (DJANGO_ENV=production) in a subprocess: HSTS, secure cookies, HTTP→HTTPS."""
    code = r"""
import json, django
django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
c = Client()
plain = c.get("/accounts/login/")
health = c.get("/healthz")
secure = c.get("/healthz", secure=True)
from django.conf import settings
print(json.dumps({
    "plain": [plain.status_code, plain.get("Location", "")],
    "health_plain": health.status_code,
    "hsts": secure.get("Strict-Transport-Security", ""),
    "csp": bool(secure.get("Content-Security-Policy")),
    "cookies": [settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, settings.SESSION_COOKIE_HTTPONLY],
    "debug": settings.DEBUG,
}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS")}
    env.update(
        DJANGO_ENV="production",
        DJANGO_SETTINGS_MODULE="planner.settings",
        SECRET_KEY="prod-" + uuid.uuid4().hex * 2,
        ALLOWED_HOSTS="testserver",
        FP_VAR_DIR=str(ROOT / "var"),
        LOG_LEVEL="ERROR",
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["plain"][0] == 301 and got["plain"][1].startswith("https://"), got
    assert got["health_plain"] == 200, "health probes must not be redirected (load balancers speak HTTP)"
    assert "max-age=31536000" in got["hsts"] and "includeSubDomains" in got["hsts"], got
    assert got["csp"]
    assert got["cookies"] == [True, True, True]
    assert got["debug"] is False


# --- rate limits ----------------------------------------------------------------------------------------
def test_login_failures_are_rate_limited_per_ip(make_user) -> None:
    from accounts.views import LOGIN_ATTEMPTS

    make_user("viewer", username="rl-carol")
    ip, other_ip = "198.51.100.7", "198.51.100.8"
    keys = [f"fp:login-fail:{ip}", f"fp:login-fail:{other_ip}"]
    cache.delete_many(keys)
    try:
        client = Client(REMOTE_ADDR=ip)
        for _ in range(LOGIN_ATTEMPTS):
            assert client.post("/accounts/login/", {"username": "rl-carol", "password": "nope"}).status_code == 200
        # Over budget: even the right password is refused, with Retry-After, and no session is made.
        resp = client.post("/accounts/login/", {"username": "rl-carol", "password": "pw-rl-carol"})
        assert resp.status_code == 429
        assert int(resp["Retry-After"]) > 0
        assert "_auth_user_id" not in client.session
        # Another address is unaffected.
        resp = Client(REMOTE_ADDR=other_ip).post("/accounts/login/", {"username": "rl-carol", "password": "pw-rl-carol"})
        assert resp.status_code == 302
    finally:
        cache.delete_many(keys)


def test_token_creation_is_rate_limited(make_user, api_client_for) -> None:
    from django.conf import settings

    from accounts.models import ApiToken

    rate = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["token"]
    limit = int(rate.split("/")[0])
    assert limit <= 100, f"token throttle {rate!r} is too loose to be a limit"
    user = make_user("finance")
    cache.delete(f"throttle_token_{user.pk}")
    try:
        client = api_client_for(user)
        codes = [client.post("/api/v1/tokens/", {"name": f"t{i}"}, format="json").status_code for i in range(limit)]
        assert set(codes) == {201}, codes
        resp = client.post("/api/v1/tokens/", {"name": "one-too-many"}, format="json")
        assert resp.status_code == 429
        assert resp.json()["status"] == 429 and resp.json()["errors"]["detail"]
        assert "Retry-After" in resp
        assert ApiToken.objects.filter(user=user).count() == limit
        # Reads are not throttled.
        assert client.get("/api/v1/tokens/").status_code == 200
    finally:
        cache.delete(f"throttle_token_{user.pk}")


# --- tokens at rest -------------------------------------------------------------------------------------
def _all_rows_text() -> str:
    """Every row of every model, serialized — what an attacker with a DB dump would see."""
    from django.apps import apps
    from django.core import serializers

    parts = []
    for model in apps.get_models():
        if model._meta.proxy or not model._meta.managed:
            continue
        try:
            parts.append(serializers.serialize("json", model._default_manager.all()))
        except Exception as exc:  # a table missing in this mode is not a leak
            parts.append(f"<{model._meta.label}: {exc.__class__.__name__}>")
    return "\n".join(parts)


def test_raw_api_tokens_are_never_stored(make_user, api_client_for) -> None:
    from django.db import connection

    from accounts.models import ApiToken, hash_token

    user = make_user("admin")
    resp = api_client_for(user).post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert resp.status_code == 201
    raw = resp.json()["token"]
    secret_part = raw[len("fp_") :]
    row = ApiToken.objects.get(pk=resp.json()["id"])
    assert row.key_hash == hash_token(raw)
    assert len(row.prefix) <= 12 and raw.startswith(row.prefix)

    dump = _all_rows_text()
    assert raw not in dump
    assert secret_part[8:] not in dump  # not even the part after the displayed prefix
    with connection.cursor() as cur:
        cur.execute(f"SELECT * FROM {ApiToken._meta.db_table}")
        assert all(secret_part[8:] not in str(col) for r in cur.fetchall() for col in r)

    # Used once, still unrecoverable from the DB; the listing never shows it.
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    listing = c.get("/api/v1/tokens/")
    assert listing.status_code == 200
    assert raw not in listing.content.decode()
    assert raw not in _all_rows_text()


@pytest.mark.parametrize(
    "header",
    [
        "Token",
        "Token a b",
        "Token fp_" + "a" * 500,
        "Token not-a-token",
        "Bearer fp_guess",
        "Token fp_\u00e9\u00e9",
    ],
)
def test_bad_authorization_headers_are_401(header, make_user) -> None:
    resp = APIClient().get("/api/v1/me/", HTTP_AUTHORIZATION=header.encode("utf-8").decode("latin-1"))
    assert resp.status_code == 401, (header, resp.status_code)
    assert resp["WWW-Authenticate"].startswith("Token")
    assert resp.json()["status"] == 401


def test_expired_demoted_and_deactivated_tokens(make_user, token_client_for) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from accounts.models import Membership

    user = make_user("admin")
    client, token = token_client_for(user, user.test_team)
    assert client.get("/api/v1/me/").status_code == 200

    # Demoting the user demotes the token: membership management needs admin.
    other = make_user("viewer", team=user.test_team)
    add = {"user": other.username, "role": "planner"}
    assert client.post(f"/api/v1/teams/{user.test_team.pk}/members/", add, format="json").status_code == 201
    Membership.objects.filter(user=user).update(role="viewer")
    assert client.post(f"/api/v1/teams/{user.test_team.pk}/members/", add, format="json").status_code == 403

    token.expires_at = timezone.now() - timedelta(seconds=1)
    token.save(update_fields=["expires_at"])
    assert client.get("/api/v1/me/").status_code == 401

    token.expires_at = None
    token.save(update_fields=["expires_at"])
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert client.get("/api/v1/me/").status_code == 401
