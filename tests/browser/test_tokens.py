"""The API token page as a finance user uses it, and the docs/api.md curl recipe, run as written.

Create (name, team, expiry) → the secret is shown once → it works against the API → the list shows its
last use → revoke → the API answers 401. The recipe block of docs/api.md is executed with bash and curl
against the live server, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.browser.a11y import assert_no_axe_violations
from tests.browser.conftest import needs_chromium, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]

ROOT = Path(__file__).resolve().parents[2]


def test_token_page_create_use_list_revoke(live_server: Any, browser: Any, make_user: Any, team: Any) -> None:
    finance = make_user("finance", team=team, username="fin-tokens")
    base = live_server.url
    page = sign_in(browser, base, finance.username)
    page.click("nav a:has-text('API tokens')")
    page.wait_for_url(f"{base}/tokens/")
    assert page.locator("#no-tokens").is_visible()
    assert_no_axe_violations(page)
    shot(page, "30-tokens-empty")

    page.fill("#id_name", "quarterly finance export")
    page.select_option("#id_expires", "30")
    page.click("#create-token")
    secret = page.locator("#token-secret").input_value()
    assert re.fullmatch(r"fp_[A-Za-z0-9_-]{20,}", secret), secret
    assert "only time it is shown" in page.locator("#token-created").inner_text()
    row = page.locator("#token-table tbody tr").first
    assert "quarterly finance export" in row.inner_text() and "active" in row.inner_text()
    assert row.locator(".token-last-used").inner_text() == "never"
    assert secret not in row.inner_text()  # the list shows the prefix only
    shot(page, "31-token-created")

    api = requests.get(f"{base}/api/v1/me/", headers={"Authorization": f"Token {secret}"}, timeout=10)
    assert api.status_code == 200 and api.json()["username"] == finance.username

    page.reload()  # the secret is gone for good; the list shows the last use
    assert page.locator("#token-secret").count() == 0
    assert page.locator("#token-table tbody tr .token-last-used").first.inner_text() != "never"

    page.on("dialog", lambda d: d.accept())
    page.click("#token-table tbody tr button:has-text('Revoke')")
    page.wait_for_selector("#token-table .badge-failed")
    shot(page, "32-token-revoked")
    again = requests.get(f"{base}/api/v1/me/", headers={"Authorization": f"Token {secret}"}, timeout=10)
    assert again.status_code == 401
    assert page.js_errors == [], page.js_errors


def test_viewer_is_told_why_there_is_no_token_form(live_server: Any, browser: Any, make_user: Any,
                                                    team: Any) -> None:
    viewer = make_user("viewer", team=team, username="vic-viewer")
    page = sign_in(browser, live_server.url, viewer.username)
    page.goto(f"{live_server.url}/tokens/")
    assert page.locator("#token-form").count() == 0
    assert "cannot hold API tokens" in page.locator("#token-not-allowed").inner_text()


@pytest.mark.skipif(not shutil.which("curl"), reason="curl not installed")
def test_docs_api_token_recipe_runs_as_written(live_server: Any, make_user: Any, team: Any) -> None:
    user = make_user("planner", team=team, username="doc-reader")
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(# fp-token-recipe.*?)```", text, re.S)
    assert block, "docs/api.md lost its token recipe"
    env = {**os.environ, "BASE": live_server.url, "FP_USER": user.username, "FP_PASSWORD": "pw-" + user.username,
           "FP_TEAM": team.slug}
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block.group(1)], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f'"username":"{user.username}"' in out.stdout.replace(" ", "")
    from accounts.models import ApiToken

    token = ApiToken.objects.get(user=user)
    assert token.name == "finance export" and token.expires_at is not None and token.last_used_at is not None
