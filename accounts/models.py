"""Users, teams, memberships and API tokens."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone

from accounts.roles import Role, role_allows
from accounts.visibility import TeamQuerySet

TOKEN_PREFIX = "fp_"


class User(AbstractUser):
    """Custom user model (from day one, so it can grow without a painful migration)."""

    display_name = models.CharField(max_length=150, blank=True)

    def teams_with(self, capability: str) -> list[int]:
        return [m.team_id for m in self.memberships.all() if role_allows(m.role, capability)]


class Team(models.Model):
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    webhook_url = models.URLField(blank=True, help_text="Re-evaluation diffs are POSTed here, signed.")
    webhook_secret = models.CharField(max_length=128, blank=True)

    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")

    team_path = "id"  # the visibility rule: a team is visible to its members
    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering: ClassVar = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints: ClassVar = [models.UniqueConstraint(fields=["user", "team"], name="uniq_membership")]
        ordering: ClassVar = ["team__name"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} as {self.role}"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class ApiTokenQuerySet(TeamQuerySet):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """An API token for finance tooling and scripts.

    The secret is shown once at creation; only its SHA-256 digest is stored. A token acts for its user
    within exactly one team, with that user's role there (checked on every request, so demoting the
    user demotes the token).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering: ClassVar = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, *, user: Any, team: Team, name: str) -> tuple[ApiToken, str]:
        """Create a token; return (row, raw secret). The raw secret is never stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, team=team, name=name, prefix=raw[:11], key_hash=hash_token(raw))
        return token, raw

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return not (self.expires_at is not None and self.expires_at <= timezone.now())

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
