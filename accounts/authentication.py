"""DRF authentication by API token (``Authorization: Token fp_…`` or ``Bearer fp_…``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import TOKEN_PREFIX, ApiToken, hash_token

LAST_USED_RESOLUTION = timedelta(seconds=60)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("token", "bearer")

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Token <key>'.")
        raw = header[1]
        if not raw.startswith(TOKEN_PREFIX) or len(raw) > 128:
            raise exceptions.AuthenticationFailed("Invalid token.")
        token = ApiToken.objects.select_related("user", "team").filter(key_hash=hash_token(raw)).first()
        if token is None or not token.is_active or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            # Coarse resolution keeps a busy finance script from writing on every request.
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Token"
