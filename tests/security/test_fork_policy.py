"""Forking policy: copying a team catalog into another team needs the catalog capability in the source team.

Issue #11 item 9: a viewer in team A who is admin in team B could fork A's catalog (with its negotiated prices)
into B, where B's members can read it. Read access is not enough to publish a team's prices to another team.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.security.seed import seed_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup():
    from accounts.models import Membership, User

    world = seed_world(execute=False)
    a, b = world.home, world.other
    dual = User.objects.create_user(username="dual", password="pw-dual")
    Membership.objects.create(user=dual, team=a.team, role="viewer")
    Membership.objects.create(user=dual, team=b.team, role="admin")
    both_admin = User.objects.create_user(username="both-admin", password="pw-both")
    Membership.objects.create(user=both_admin, team=a.team, role="admin")
    Membership.objects.create(user=both_admin, team=b.team, role="admin")
    return world, dual, both_admin


def _client(user, team) -> APIClient:
    c = APIClient()
    c.force_login(user)
    c.defaults["HTTP_X_TEAM"] = team.slug
    c.raise_request_exception = False
    return c


def test_viewer_in_source_cannot_fork_its_catalog_into_another_team(setup) -> None:
    from planning.models import Catalog

    world, dual, _ = setup
    a, b = world.home, world.other
    before = Catalog.objects.filter(team=b.team).count()
    client = _client(dual, b.team)
    resp = client.post(f"/api/v1/catalogs/{a.catalog.pk}/fork/", {"name": "leak"}, format="json")
    assert resp.status_code == 403, resp.content[:300]
    assert "catalog capability" in resp.json()["errors"]["detail"][0]
    resp = client.post("/api/v1/catalogs/", {"name": "leak2", "fork_from": a.catalog.pk}, format="json")
    assert resp.status_code == 403, resp.content[:300]
    assert Catalog.objects.filter(team=b.team).count() == before


def test_catalog_admin_of_both_teams_may_fork(setup) -> None:
    from planning.models import Catalog

    world, _, both_admin = setup
    a, b = world.home, world.other
    resp = _client(both_admin, b.team).post(f"/api/v1/catalogs/{a.catalog.pk}/fork/", {"name": "shared"},
                                            format="json")
    assert resp.status_code == 201, resp.content[:300]
    fork = Catalog.objects.get(pk=resp.json()["id"])
    assert fork.team_id == b.team.pk and fork.forked_from_id == a.catalog.pk


def test_global_catalog_and_same_team_forks_need_only_the_target_capability(setup) -> None:
    from planning.models import Catalog

    world, dual, _ = setup
    b = world.other
    client = _client(dual, b.team)
    default = Catalog.objects.filter(team__isnull=True).first()
    assert client.post(f"/api/v1/catalogs/{default.pk}/fork/", {"name": "from default"},
                       format="json").status_code == 201
    assert client.post(f"/api/v1/catalogs/{b.catalog.pk}/fork/", {"name": "same team"},
                       format="json").status_code == 201


def test_service_enforces_the_policy_for_every_caller(setup) -> None:
    """The portal and the API share the rule: it lives in planning.services.catalog_fork."""
    from core.errors import PermissionDenied
    from planning import services

    world, dual, _ = setup
    with pytest.raises(PermissionDenied):
        services.catalog_fork(catalog=world.home.catalog, team=world.other.team, user=dual)
