"""Team webhook target: set by team admins over the API, secret shown once, SSRF guard in production."""

from __future__ import annotations

import pytest

from accounts.webhooks import WebhookTargetError, check_webhook_url

pytestmark = pytest.mark.django_db


def test_admin_sets_webhook_and_gets_secret_once(make_user, api_client_for) -> None:
    admin = make_user("admin")
    client = api_client_for(admin)
    url = f"/api/v1/teams/{admin.test_team.pk}/webhook/"
    assert client.get(url).json() == {"url": "", "has_secret": False}
    resp = client.put(url, {"url": "https://hooks.example.com/fp"}, format="json")
    assert resp.status_code == 200, resp.content
    secret = resp.json()["secret"]
    assert secret.startswith("whsec_")
    admin.test_team.refresh_from_db()
    assert admin.test_team.webhook_secret == secret
    # Shown once: reading or re-saving the URL does not reveal it again; rotating makes a new one.
    assert "secret" not in client.get(url).json()
    assert "secret" not in client.put(url, {"url": "https://hooks.example.com/v2"}, format="json").json()
    rotated = client.put(url, {"url": "https://hooks.example.com/v2", "rotate_secret": True}, format="json").json()
    assert rotated["secret"] != secret
    cleared = client.put(url, {"url": ""}, format="json").json()
    assert cleared == {"url": "", "has_secret": False}


@pytest.mark.parametrize("role", ["viewer", "planner", "finance"])
def test_only_admins_manage_the_webhook(make_user, api_client_for, role) -> None:
    user = make_user(role)
    url = f"/api/v1/teams/{user.test_team.pk}/webhook/"
    assert api_client_for(user).put(url, {"url": "https://hooks.example.com/x"}, format="json").status_code == 403
    user.test_team.refresh_from_db()
    assert user.test_team.webhook_url == ""


def test_bad_webhook_url_is_a_400_naming_url(make_user, api_client_for) -> None:
    admin = make_user("admin")
    resp = api_client_for(admin).put(f"/api/v1/teams/{admin.test_team.pk}/webhook/", {"url": "ftp://x"}, format="json")
    assert resp.status_code == 400
    assert "url" in resp.json()["errors"]


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/hook", "http://10.0.0.5/hook", "http://169.254.169.254/latest/meta-data",
    "http://[::1]/x", "http://localhost/x", "http://192.168.1.1/x",
])
def test_private_targets_are_refused_when_not_allowed(settings, url) -> None:
    settings.FP_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(WebhookTargetError):
        check_webhook_url(url)


def test_public_targets_pass_and_private_allowed_in_development(settings) -> None:
    settings.FP_WEBHOOK_ALLOW_PRIVATE = False
    assert check_webhook_url("https://8.8.8.8/hook") == "https://8.8.8.8/hook"
    settings.FP_WEBHOOK_ALLOW_PRIVATE = True
    assert check_webhook_url("http://127.0.0.1:9/hook") == "http://127.0.0.1:9/hook"
