"""The one visibility rule: which teams a request (or a user) may act on, and the querysets that apply it.

NetBox's ``restrict()`` in one method: ``Model.objects.for_request(request, capability)``. Every viewset,
serializer field, selector, form and page reads through it; other teams' rows are filtered out, so they
answer 404 and their existence is not leaked.

A model says where its team is: ``team_path`` (default ``"team"``; ``"catalog__team"`` for a catalog
version; ``"id"`` for ``Team`` itself), and which rows everyone may *read* in ``public_rows`` (a ``Q``; the
global default catalog). A session user acts in every team they belong to; an API token only in its own.

This module imports no model (``accounts.models`` builds its managers from it); it reaches memberships and
tokens through the app registry.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db import models
from django.db.models import Q

from accounts.roles import Capability, role_allows


class UserRequest:
    """Lets the rule take a user where there is no request (commands, tasks, selectors called by them)."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.auth = None


def as_request(request_or_user: Any) -> Any:
    return request_or_user if request_or_user is None or hasattr(request_or_user, "user") else UserRequest(request_or_user)


def memberships(user: Any) -> list[Any]:
    """The user's memberships (cached on the user object for the request)."""
    if not getattr(user, "is_authenticated", False):
        return []
    cache = getattr(user, "_fp_memberships", None)
    if cache is None:
        membership = apps.get_model("accounts", "Membership")
        cache = list(membership.objects.filter(user=user).select_related("team"))
        user._fp_memberships = cache
    return cache


def request_token(request: Any) -> Any:
    """The API token the request authenticated with, or None (a session)."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, apps.get_model("accounts", "ApiToken")) else None


def visible_team_ids(request_or_user: Any, capability: str = Capability.READ) -> list[int]:
    """Teams whose objects this request may act on with ``capability``.

    A token is confined to its own team; a session user sees every team they belong to.
    """
    request = as_request(request_or_user)
    user = getattr(request, "user", None)
    token = request_token(request)
    ids = [m.team_id for m in memberships(user) if role_allows(m.role, capability)]
    if token is not None:
        ids = [i for i in ids if i == token.team_id]
    return ids


def visibility_filter(model: Any, request_or_user: Any, capability: str = Capability.READ) -> Q:
    """The ``Q`` of ``model``'s rows the request may act on with ``capability``."""
    teams = visible_team_ids(request_or_user, capability)
    path = getattr(model, "team_path", "team")
    cond = Q(pk__in=teams) if path in ("id", "pk") else Q(**{f"{path}_id__in": teams})
    public = getattr(model, "public_rows", None)
    if public is not None and capability == Capability.READ:
        cond |= public
    return cond


class TeamQuerySet(models.QuerySet):
    """Querysets of team-owned models: ``Model.objects.for_request(request, capability)``."""

    def for_request(self, request_or_user: Any, capability: str = Capability.READ) -> Any:
        return self.filter(visibility_filter(self.model, request_or_user, capability))

    def for_team(self, team: Any) -> Any:
        return self.filter(team=team)
