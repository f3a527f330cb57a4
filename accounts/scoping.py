"""Team scoping: the one place that decides which teams a request may see or change.

Every planning object inherits :class:`TeamOwnedModel`; every API viewset and portal view reads through
:func:`visible_team_ids` / :meth:`TeamQuerySet.for_request` and checks writes with
:func:`require_capability`. Objects of other teams are filtered out of querysets, so they answer 404 —
their existence is not leaked.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.http import HttpRequest
from rest_framework import exceptions

from accounts.models import ApiToken, Membership, Team
from accounts.roles import Capability, role_allows

SESSION_TEAM_KEY = "active_team_id"


def _memberships(user: Any) -> list[Membership]:
    if not getattr(user, "is_authenticated", False):
        return []
    cache = getattr(user, "_fp_memberships", None)
    if cache is None:
        cache = list(Membership.objects.filter(user=user).select_related("team"))
        user._fp_memberships = cache
    return cache


def request_token(request: Any) -> ApiToken | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiToken) else None


def visible_team_ids(request: Any, capability: str = Capability.READ) -> list[int]:
    """Teams whose objects this request may act on with ``capability``.

    A token is confined to its own team; a session user sees every team they belong to.
    """
    user = getattr(request, "user", None)
    token = request_token(request)
    ids = [m.team_id for m in _memberships(user) if role_allows(m.role, capability)]
    if token is not None:
        ids = [i for i in ids if i == token.team_id]
    return ids


def role_in(request: Any, team_id: int | None) -> str | None:
    token = request_token(request)
    if token is not None and token.team_id != team_id:
        return None
    for m in _memberships(getattr(request, "user", None)):
        if m.team_id == team_id:
            return m.role
    return None


def has_capability(request: Any, team_id: int | None, capability: str) -> bool:
    role = role_in(request, team_id)
    return role is not None and role_allows(role, capability)


def require_capability(request: Any, team_id: int | None, capability: str) -> None:
    if not has_capability(request, team_id, capability):
        raise exceptions.PermissionDenied(f"Your role in this team does not allow '{capability}'.")


def active_team(request: Any, capability: str = Capability.READ) -> Team | None:
    """The team a new object goes to: token's team, ``X-Team`` header, session choice, or the only one."""
    token = request_token(request)
    if token is not None:
        return token.team if has_capability(request, token.team_id, capability) else None
    all_memberships = _memberships(getattr(request, "user", None))
    wanted = None
    header = getattr(request, "headers", {}).get("X-Team") if hasattr(request, "headers") else None
    if header:
        wanted = header
    else:
        session = getattr(request, "session", None)
        if session is not None and session.get(SESSION_TEAM_KEY):
            wanted = str(session.get(SESSION_TEAM_KEY))
    if wanted:
        chosen = next((m for m in all_memberships if str(m.team_id) == wanted or m.team.slug == wanted), None)
        if chosen is not None:
            # The team the user picked, or nothing: never silently write into another team.
            return chosen.team if role_allows(chosen.role, capability) else None
        if header:
            return None
    capable = [m for m in all_memberships if role_allows(m.role, capability)]
    return capable[0].team if capable else None


class TeamQuerySet(models.QuerySet):
    def for_request(self, request: Any, capability: str = Capability.READ) -> TeamQuerySet:
        return self.filter(team_id__in=visible_team_ids(request, capability))

    def for_team(self, team: Team | int) -> TeamQuerySet:
        return self.filter(team=team)


class AuditedModel(models.Model):
    """Who created/updated a row and when (every planning object, team-owned or global)."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class TeamOwnedModel(AuditedModel):
    """Abstract base of every team-owned planning object: its team, plus the audit fields."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")

    objects = TeamQuerySet.as_manager()

    class Meta:
        abstract = True
        ordering: ClassVar = ["-created_at"]


def portal_request_teams(request: HttpRequest) -> list[Team]:
    return [m.team for m in _memberships(request.user)]
