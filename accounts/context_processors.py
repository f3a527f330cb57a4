from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.scoping import SESSION_TEAM_KEY


def teams(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    memberships = list(user.memberships.select_related("team"))
    active_id = request.session.get(SESSION_TEAM_KEY)
    active = next((m for m in memberships if m.team_id == active_id), memberships[0] if memberships else None)
    return {"fp_memberships": memberships, "fp_active_membership": active}
