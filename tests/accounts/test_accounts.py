"""Accounts: custom user, roles, hashed tokens shown once, revocation, last-used time."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.models import ApiToken, hash_token
from accounts.roles import ROLE_CAPABILITIES, Capability, Role

pytestmark = pytest.mark.django_db


def test_custom_user_model_is_active() -> None:
    from django.contrib.auth import get_user_model

    assert get_user_model()._meta.label == "accounts.User"


def test_role_capabilities_match_the_brief() -> None:
    assert ROLE_CAPABILITIES[Role.VIEWER] == {Capability.READ}
    assert Capability.PLAN in ROLE_CAPABILITIES[Role.PLANNER]
    assert Capability.PLAN not in ROLE_CAPABILITIES[Role.FINANCE]
    assert {Capability.EXPORT, Capability.TOKEN} <= ROLE_CAPABILITIES[Role.FINANCE]
    assert ROLE_CAPABILITIES[Role.ADMIN] == set(Capability.ALL)


def test_token_is_shown_once_and_stored_hashed(make_user, api_client_for) -> None:
    user = make_user("finance")
    client = api_client_for(user)
    resp = client.post("/api/v1/tokens/", {"name": "finance-etl"}, format="json")
    assert resp.status_code == 201, resp.content
    raw = resp.json()["token"]
    assert raw.startswith("fp_")
    row = ApiToken.objects.get(pk=resp.json()["id"])
    assert row.key_hash == hash_token(raw)
    assert raw not in (row.key_hash, row.prefix)
    # Listing never shows the secret again.
    listed = client.get("/api/v1/tokens/").json()["results"]
    assert listed and all("token" not in t for t in listed)


def test_token_authenticates_records_last_use_and_revocation_locks_out(make_user, api_client_for) -> None:
    user = make_user("finance")
    raw = api_client_for(user).post("/api/v1/tokens/", {"name": "t"}, format="json").json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    resp = client.get("/api/v1/me/")
    assert resp.status_code == 200
    assert resp.json()["username"] == user.username
    token = ApiToken.objects.get(key_hash=hash_token(raw))
    assert token.last_used_at is not None

    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert bearer.get("/api/v1/me/").status_code == 200

    assert api_client_for(user).delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    resp = client.get("/api/v1/me/")
    assert resp.status_code == 401
    assert resp.json()["errors"]["detail"]
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_viewer_cannot_hold_tokens(make_user, api_client_for) -> None:
    user = make_user("viewer")
    resp = api_client_for(user).post("/api/v1/tokens/", {"name": "x"}, format="json")
    assert resp.status_code == 403
    assert not ApiToken.objects.filter(user=user).exists()


def test_token_confined_to_its_team(make_user, token_client_for, other_team) -> None:
    from accounts.models import Membership

    user = make_user("finance")
    Membership.objects.create(user=user, team=other_team, role="finance")
    client, _ = token_client_for(user, user.test_team)
    slugs = {t["slug"] for t in client.get("/api/v1/teams/").json()["results"]}
    assert slugs == {user.test_team.slug}


def test_users_cannot_see_or_revoke_other_users_tokens(make_user, api_client_for) -> None:
    owner = make_user("finance")
    token, _ = ApiToken.issue(user=owner, team=owner.test_team, name="mine")
    intruder = make_user("admin", team=owner.test_team)
    client = api_client_for(intruder)
    assert client.get(f"/api/v1/tokens/{token.pk}/").status_code == 404
    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_team_members_managed_by_admin_only(make_user, api_client_for) -> None:
    admin = make_user("admin")
    viewer = make_user("viewer", team=admin.test_team)
    newcomer = make_user(role="", username="newcomer")
    url = f"/api/v1/teams/{admin.test_team.pk}/members/"
    assert api_client_for(viewer).post(url, {"user": "newcomer", "role": "planner"}, format="json").status_code == 403
    resp = api_client_for(admin).post(url, {"user": "newcomer", "role": "planner"}, format="json")
    assert resp.status_code == 201, resp.content
    assert newcomer.memberships.get().role == "planner"
    bad = api_client_for(admin).post(url, {"user": "newcomer", "role": "owner"}, format="json")
    assert bad.status_code == 400
    assert "role" in bad.json()["errors"]


def test_cross_team_team_detail_is_404(make_user, api_client_for, other_team) -> None:
    user = make_user("admin")
    assert api_client_for(user).get(f"/api/v1/teams/{other_team.pk}/").status_code == 404
    assert api_client_for(user).get(f"/api/v1/teams/{other_team.pk}/members/").status_code == 404
