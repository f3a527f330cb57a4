"""DRF permission + viewset mixin enforcing team scope on every team-owned endpoint."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import exceptions, generics, permissions
from rest_framework.request import Request

from accounts.roles import Capability
from accounts.scoping import active_team, has_capability, visible_team_ids


class TeamCapabilityPermission(permissions.BasePermission):
    """Reads need READ in the object's team; writes need the view's ``write_capability``.

    Views may map actions to capabilities with ``action_capabilities = {"run": "plan", "export": "export"}``.
    """

    def _capability(self, request: Request, view: Any) -> str:
        action = getattr(view, "action", None)
        mapping = getattr(view, "action_capabilities", {}) or {}
        if action in mapping:
            return str(mapping[action])
        if request.method in permissions.SAFE_METHODS:
            return Capability.READ
        return str(getattr(view, "write_capability", Capability.PLAN))

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        capability = self._capability(request, view)
        # The user must hold the capability in at least one team visible to this request.
        return bool(visible_team_ids(request, capability))

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        team_id = getattr(obj, "team_id", None)
        capability = self._capability(request, view)
        if team_id is None:
            # Global objects (the default catalog) are read-only for everyone.
            return capability == Capability.READ
        return has_capability(request, team_id, capability)


class TeamScopedViewSetMixin(generics.GenericAPIView):
    """Mixin for ModelViewSets over TeamOwnedModel: scoped queryset, team stamped on create.

    Subclasses set ``queryset``; ``get_queryset`` narrows it to visible teams, so other teams' rows 404.
    Use it first in the bases: ``class FleetViewSet(TeamScopedViewSetMixin, viewsets.ModelViewSet)``.
    """

    permission_classes = [TeamCapabilityPermission]
    write_capability = Capability.PLAN
    # The app's selector for this endpoint (``staticmethod(selectors.fleet_list)``): reads go through it; the
    # class ``queryset`` adds the endpoint's joins and default order.
    selector: Any = None

    def scope_queryset(self, queryset: QuerySet) -> QuerySet:
        """The one visibility rule (``Model.objects.for_request``), for reads; writes check capabilities."""
        return queryset.for_request(self.request, Capability.READ)  # type: ignore[attr-defined]

    def get_queryset(self) -> QuerySet:
        queryset = super().get_queryset()
        if self.selector is None:
            return self.scope_queryset(queryset)
        return queryset & self.selector(self.request)

    def get_target_team(self, capability: str | None = None) -> Any:
        cap = capability or self.write_capability
        team = active_team(self.request, cap)
        if team is None:
            raise exceptions.PermissionDenied(f"You have no team where your role allows '{cap}'.")
        return team
