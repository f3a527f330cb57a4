"""Team webhook targets: what URL a team may point re-evaluation diffs at.

Outbound requests from our workers are a server-side request forgery risk: a team admin could aim the
webhook at the metadata service or an internal database. In production (and whenever
``FP_WEBHOOK_ALLOW_PRIVATE`` is off) the target must be http(s) on a public address — checked when the URL
is saved (literal addresses, ``localhost``) and again just before each delivery (after DNS resolution, so a
name that later resolves inside the network is refused too).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class WebhookTargetError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.field = "url"
        self.message = message


def _is_private(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return not ip.is_global or ip.is_multicast


def check_webhook_url(url: str, *, resolve: bool = False) -> str:
    """Return the normalised URL or raise WebhookTargetError saying why it is refused."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise WebhookTargetError("must be an http:// or https:// URL")
    if not parts.hostname:
        raise WebhookTargetError("must name a host")
    if len(url) > 500:
        raise WebhookTargetError("must be at most 500 characters")
    if getattr(settings, "FP_WEBHOOK_ALLOW_PRIVATE", False):
        return url.strip()
    host = parts.hostname
    if host == "localhost" or host.endswith(".localhost"):
        raise WebhookTargetError("must not point at this host (localhost)")
    try:
        if _is_private(host):
            raise WebhookTargetError(f"must be a public address, not {host}")
    except ValueError as exc:
        if isinstance(exc, WebhookTargetError):
            raise
        # a name, not an address literal
        if resolve:
            try:
                infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80))
            except OSError as err:
                raise WebhookTargetError(f"cannot resolve {host}: {err}") from None
            for info in infos:
                if _is_private(str(info[4][0])):
                    raise WebhookTargetError(f"{host} resolves to a non-public address {info[4][0]}") from None
    return url.strip()
