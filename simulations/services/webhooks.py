"""Signed delivery of re-evaluation diffs to a team's webhook."""

from __future__ import annotations

import hashlib
import hmac
import time
import urllib.error
import urllib.request
from typing import Any

from django.db.models import F
from django.utils import timezone

from accounts.webhooks import WebhookTargetError, check_webhook_url
from simulations.models import ReEvaluation
from simulations.services.hashing import canonical_json


class WebhookError(Exception):
    """A retryable delivery failure (network error, HTTP 5xx or 429)."""


def webhook_payload(*, reevaluation: ReEvaluation) -> dict[str, Any]:
    plan = reevaluation.capacity_plan
    subject = ({"capacity_plan": {"id": plan.pk, "name": plan.name}} if plan is not None else
               {"scenario": {"id": reevaluation.scenario_id,
                             "name": reevaluation.scenario.name if reevaluation.scenario else None}})
    return {
        "event": "capacity_plan.reevaluated" if plan is not None else "scenario.reevaluated",
        "id": reevaluation.pk,
        "team": reevaluation.team.slug,
        **subject,
        "previous_run": reevaluation.previous_run_id,
        "new_run": reevaluation.new_run_id,
        "reasons": reevaluation.reasons,
        "summary": reevaluation.summary,
        "changes": reevaluation.changes,
    }


def webhook_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>``."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def webhook_deliver(*, reevaluation_id: int, timeout_s: float = 10.0) -> bool:
    """POST the diff to the team webhook, signed. Raises WebhookError on a retryable failure."""
    reeval = ReEvaluation.objects.select_related("team", "scenario", "capacity_plan").get(pk=reevaluation_id)
    if reeval.delivery_status in (ReEvaluation.Delivery.DELIVERED, ReEvaluation.Delivery.NONE):
        return reeval.delivery_status == ReEvaluation.Delivery.DELIVERED
    team = reeval.team
    if not team.webhook_url:
        ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_status=ReEvaluation.Delivery.NONE)
        return False
    try:
        check_webhook_url(team.webhook_url, resolve=True)
    except WebhookTargetError as exc:
        webhook_give_up(reevaluation_id=reeval.pk, error=f"webhook_url {exc.message}")
        return False
    body = canonical_json(webhook_payload(reevaluation=reeval)).encode("utf-8")
    ts = str(int(time.time()))
    request = urllib.request.Request(  # noqa: S310 (scheme checked above)
        team.webhook_url, data=body, method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "FabricPlanner-Webhook/1",
            "X-Fabric-Planner-Event": "scenario.reevaluated",
            "X-Fabric-Planner-Delivery": str(reeval.pk),
            "X-Fabric-Planner-Timestamp": ts,
            "X-Fabric-Planner-Signature": webhook_signature(secret=team.webhook_secret, timestamp=ts, body=body),
        },
    )
    ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_attempts=F("delivery_attempts") + 1)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 (scheme checked above)
            code = response.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (urllib.error.URLError, OSError) as exc:
        ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_error=str(exc)[:2000])
        raise WebhookError(str(exc)) from exc
    if 200 <= code < 300:
        ReEvaluation.objects.filter(pk=reeval.pk).update(
            delivery_status=ReEvaluation.Delivery.DELIVERED, delivered_at=timezone.now(), delivery_error=""
        )
        return True
    ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_error=f"HTTP {code}")
    if code >= 500 or code == 429:
        raise WebhookError(f"HTTP {code}")
    ReEvaluation.objects.filter(pk=reeval.pk).update(delivery_status=ReEvaluation.Delivery.FAILED)
    return False


def webhook_give_up(*, reevaluation_id: int, error: str) -> None:
    ReEvaluation.objects.filter(pk=reevaluation_id).update(
        delivery_status=ReEvaluation.Delivery.FAILED, delivery_error=error[:2000]
    )
