"""django-filter filtersets for the accounts API's list endpoints."""

from __future__ import annotations

from accounts.models import Team
from core.api.filtersets import ScopedFilterSet


class TeamFilterSet(ScopedFilterSet):
    class Meta:
        model = Team
        fields = ("slug",)
