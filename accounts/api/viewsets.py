"""The base of every CRUD viewset whose writes go through services (NetBox's ``NetBoxModelViewSet`` role)."""

from __future__ import annotations

from typing import Any

from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.permissions import TeamScopedViewSetMixin
from core.api.concurrency import check_if_match, etag_for


class ServiceModelViewSet(TeamScopedViewSetMixin, viewsets.ModelViewSet):
    """CRUD whose writes call services: ``do_create(team, user, data)``, ``do_update``, ``do_delete``."""

    def do_create(self, *, team: Any, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def do_update(self, *, instance: Any, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def do_delete(self, *, instance: Any) -> None:
        raise NotImplementedError

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        team = self.get_target_team()
        instance = self.do_create(team=team, data=dict(serializer.validated_data))
        return Response(self.get_serializer(instance).data, status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        return Response(self.get_serializer(instance).data, headers={"ETag": etag_for(instance)})

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        partial = kwargs.pop("partial", False)
        instance = self.get_object()
        check_if_match(request, instance)
        serializer = self.get_serializer(instance, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        instance = self.do_update(instance=instance, data=dict(serializer.validated_data))
        return Response(self.get_serializer(instance).data, headers={"ETag": etag_for(instance)})

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        check_if_match(request, instance)
        self.do_delete(instance=instance)
        return Response(status=status.HTTP_204_NO_CONTENT)
