"""Fuzzing the #15 portal pages that take input: the token form, token revoke ids, the run export format.

Hypothesis sends arbitrary text (NUL bytes, huge strings, odd Unicode, numbers out of range) as a signed-in
finance user: never a 500, a refused request writes nothing, an accepted one writes exactly one token of the
user's own team that expires within the choices offered.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.django_db

TEXT = st.text(min_size=0, max_size=300) | st.sampled_from(["", "\x00", "30", "never", "-1", "1e309", "%00", "🙂" * 50])


@pytest.fixture
def finance(make_user: Any, team: Any) -> Any:
    return make_user("finance", team)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=TEXT, team_field=TEXT, expires=TEXT)
def test_token_form_never_500_and_writes_only_valid_tokens(finance: Any, team: Any, name: str, team_field: str,
                                                           expires: str) -> None:
    from accounts.models import ApiToken

    client = Client(raise_request_exception=False)
    client.force_login(finance)
    before = ApiToken.objects.count()
    resp = client.post("/tokens/", {"name": name, "team": team_field, "expires": expires})
    assert resp.status_code in (302, 400, 403), resp.status_code
    after = ApiToken.objects.count()
    if resp.status_code == 302:
        assert after == before + 1
        token = ApiToken.objects.order_by("-pk").first()
        assert token is not None and token.user_id == finance.pk and token.team_id == team.pk
        assert token.name == name.strip() and "\x00" not in token.name
    else:
        assert after == before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pk=st.integers(min_value=-(2**63), max_value=2**63) | st.just(0), fmt=TEXT)
def test_revoke_and_export_ids_and_formats_never_500(finance: Any, pk: int, fmt: str) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(finance)
    if pk >= 0:
        assert client.post(f"/tokens/{pk}/revoke/").status_code in (404,)
        assert client.get(f"/runs/{pk}/export/", {"format": fmt}).status_code in (404,)
