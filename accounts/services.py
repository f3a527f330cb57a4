"""Account services: team membership and API token lifecycle."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction
from django.utils.text import slugify
from rest_framework import exceptions

from accounts.models import ApiToken, Membership, Team, User
from accounts.roles import Capability, Role, role_allows


def team_create(*, name: str, owner: User, slug: str | None = None) -> Team:
    with transaction.atomic():
        team = Team.objects.create(name=name, slug=slug or slugify(name)[:64])
        Membership.objects.create(user=owner, team=team, role=Role.ADMIN)
    return team


def membership_set(*, team: Team, user: User, role: str) -> Membership:
    if role not in Role.values:
        raise exceptions.ValidationError({"role": [f"must be one of {', '.join(Role.values)}"]})
    membership, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return membership


def token_issue(*, user: Any, team: Team, name: str) -> tuple[ApiToken, str]:
    membership = Membership.objects.filter(user=user, team=team).first()
    if membership is None or not role_allows(membership.role, Capability.TOKEN):
        raise exceptions.PermissionDenied("Your role in this team cannot hold API tokens.")
    return ApiToken.issue(user=user, team=team, name=name)


def token_revoke(*, token: ApiToken, by: Any) -> ApiToken:
    if token.user_id != by.id:
        raise exceptions.NotFound()
    token.revoke()
    return token


def team_webhook_set(*, team: Team, url: str, rotate_secret: bool = False) -> str | None:
    """Set (or clear, with "") the team's webhook URL. Returns a new signing secret when one is made.

    A secret is generated the first time a URL is set and whenever ``rotate_secret`` is asked; it is
    returned once and only stored.
    """
    from accounts.webhooks import WebhookTargetError, check_webhook_url

    if url:
        try:
            url = check_webhook_url(url)
        except WebhookTargetError as exc:
            raise exceptions.ValidationError({"url": [exc.message]}) from None
    new_secret = None
    if url and (rotate_secret or not team.webhook_secret):
        new_secret = "whsec_" + secrets.token_urlsafe(32)
        team.webhook_secret = new_secret
    team.webhook_url = url
    if not url:
        team.webhook_secret = ""
    team.save(update_fields=["webhook_url", "webhook_secret"])
    return new_secret
