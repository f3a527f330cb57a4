"""Team scoping: roles in a team, the active team for new objects, and the team-owned model base.

Reads go through the one visibility rule, ``Model.objects.for_request(request, capability)``
(:mod:`accounts.visibility`, re-exported here); writes are checked with :func:`require_capability`.
Objects of other teams are filtered out of querysets, so they answer 404 — their existence is not leaked.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.http import HttpRequest

from accounts.models import Team
from accounts.roles import Capability, role_allows
from accounts.visibility import TeamQuerySet, as_request, memberships, request_token, visible_team_ids
from core.errors import PermissionDenied

SESSION_TEAM_KEY = "active_team_id"

__all__ = [
    "SESSION_TEAM_KEY", "AuditedModel", "TeamOwnedModel", "TeamQuerySet", "active_team", "as_request", "has_capability",
    "portal_request_teams", "request_token", "require_capability", "role_in", "visible_team_ids",
]


def role_in(request: Any, team_id: int | None) -> str | None:
    token = request_token(request)
    if token is not None and token.team_id != team_id:
        return None
    for m in memberships(getattr(request, "user", None)):
        if m.team_id == team_id:
            return m.role
    return None


def has_capability(request: Any, team_id: int | None, capability: str) -> bool:
    role = role_in(request, team_id)
    return role is not None and role_allows(role, capability)


def require_capability(request: Any, team_id: int | None, capability: str) -> None:
    if not has_capability(request, team_id, capability):
        raise PermissionDenied(f"Your role in this team does not allow '{capability}'.")


def active_team(request: Any, capability: str = Capability.READ) -> Team | None:
    """The team a new object goes to: token's team, ``X-Team`` header, session choice, or the only one."""
    token = request_token(request)
    if token is not None:
        return token.team if has_capability(request, token.team_id, capability) else None
    all_memberships = memberships(getattr(request, "user", None))
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
    return [m.team for m in memberships(request.user)]
