"""The builder's rank-assignment input (cluster.rank_assignment): a posted topology-aware order is written to the
scenario's cluster, an edit shows and keeps it, the default writes no key, and a value outside the engine's enum
is refused beside the input (a page with the field's error, nothing saved)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, refused_builder_post
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db


def _saved(name: str) -> Any:
    from planning.models import Scenario

    return Scenario.objects.get(name=name)


def test_topology_aware_is_written_shown_and_kept(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "aware", "rank_assignment": "topology-aware"})
    assert r.status_code == 302, r.content.decode()[:2000]
    s = _saved("aware")
    assert s.cluster["rank_assignment"] == "topology-aware"
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert posted["rank_assignment"] == "topology-aware"
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.cluster["rank_assignment"] == "topology-aware"
    # back to the default: the key goes
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "rank_assignment": "unaligned"})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert "rank_assignment" not in s.cluster


def test_the_default_writes_no_key(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "plain"})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert "rank_assignment" not in _saved("plain").cluster


def test_an_unknown_order_is_refused_beside_the_input(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    _, errors = refused_builder_post(client, {**BUILDER_POST, "name": "bad", "rank_assignment": "by-hostname"})
    assert "rank_assignment" in errors
