"""Account services: team membership and API token lifecycle."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from accounts.models import ApiToken, Membership, Team, User
from accounts.roles import Capability, Role, role_allows
from accounts.webhooks import WebhookTargetError, check_webhook_url
from core.errors import NotFound, PermissionDenied, ValidationError


def team_create(*, name: str, owner: User, slug: str | None = None) -> Team:
    with transaction.atomic():
        team = Team.objects.create(name=name, slug=slug or slugify(name)[:64])
        Membership.objects.create(user=owner, team=team, role=Role.ADMIN)
    return team


def membership_set(*, team: Team, user: User, role: str) -> Membership:
    if role not in Role.values:
        raise ValidationError({"role": [f"must be one of {', '.join(Role.values)}"]})
    membership, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return membership


MAX_TOKEN_DAYS = 730  # two years: a token older than that is a forgotten one


def token_issue(*, user: Any, team: Team, name: str, expires_at: Any = None) -> tuple[ApiToken, str]:
    """Issue a token for ``user`` in ``team`` (their role there must allow tokens); ``expires_at`` optional."""
    membership = Membership.objects.filter(user=user, team=team).first()
    if membership is None or not role_allows(membership.role, Capability.TOKEN):
        raise PermissionDenied("Your role in this team cannot hold API tokens.")
    if expires_at is not None:
        now = timezone.now()
        if expires_at <= now:
            raise ValidationError({"expires_at": ["must be in the future"]})
        if expires_at > now + timedelta(days=MAX_TOKEN_DAYS):
            raise ValidationError({"expires_at": [f"at most {MAX_TOKEN_DAYS} days from now"]})
    token, raw = ApiToken.issue(user=user, team=team, name=name)
    if expires_at is not None:
        token.expires_at = expires_at
        token.save(update_fields=["expires_at"])
    return token, raw


def token_revoke(*, token: ApiToken, by: Any) -> ApiToken:
    if token.user_id != by.id:
        raise NotFound()
    token.revoke()
    return token


def team_webhook_set(*, team: Team, url: str, rotate_secret: bool = False) -> str | None:
    """Set (or clear, with "") the team's webhook URL. Returns a new signing secret when one is made.

    A secret is generated the first time a URL is set and whenever ``rotate_secret`` is asked; it is
    returned once and only stored.
    """
    if url:
        try:
            url = check_webhook_url(url)
        except WebhookTargetError as exc:
            raise ValidationError({"url": [exc.message]}) from None
    new_secret = None
    if url and (rotate_secret or not team.webhook_secret):
        new_secret = "whsec_" + secrets.token_urlsafe(32)
        team.webhook_secret = new_secret
    team.webhook_url = url
    if not url:
        team.webhook_secret = ""
    team.save(update_fields=["webhook_url", "webhook_secret"])
    return new_secret
