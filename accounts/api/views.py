"""Account endpoints: /api/v1/me, /api/v1/teams, /api/v1/tokens."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import services
from accounts.api.filtersets import TeamFilterSet
from accounts.api.serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenCreateSerializer,
    ApiTokenSerializer,
    MembershipSerializer,
    MeSerializer,
    TeamSerializer,
    TeamWebhookResponseSerializer,
    TeamWebhookSerializer,
)
from accounts.models import ApiToken, Membership, Team
from accounts.roles import Capability
from accounts.scoping import active_team, require_capability
from core.api.throttles import AtomicScopedRateThrottle


class MeView(APIView):
    """The signed-in user (or the token's user) and their teams with roles."""

    permission_classes = (permissions.IsAuthenticated,)

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(request.user).data)


class TeamViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = TeamSerializer
    permission_classes = (permissions.IsAuthenticated,)
    filterset_class = TeamFilterSet
    ordering_fields = ("name", "created_at")

    def get_queryset(self) -> QuerySet[Team]:
        if getattr(self, "swagger_fake_view", False):
            return Team.objects.none()
        return Team.objects.for_request(self.request).order_by("name")

    @extend_schema(
        methods=["GET"], responses=MembershipSerializer(many=True), description="Members of the team and roles."
    )
    @extend_schema(
        methods=["POST"], request=MembershipSerializer, responses={201: MembershipSerializer},
        description="Add a member or change their role (team admins only).",
    )
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def members(self, request: Request, pk: Any = None) -> Response:
        team = self.get_object()
        if request.method == "POST":
            require_capability(request, team.id, Capability.MANAGE)
            ser = MembershipSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            m = services.membership_set(team=team, user=ser.validated_data["user"], role=ser.validated_data["role"])
            return Response(MembershipSerializer(m).data, status=status.HTTP_201_CREATED)
        qs = Membership.objects.filter(team=team).select_related("user")
        return Response(MembershipSerializer(qs, many=True).data)


    @extend_schema(methods=["GET"], responses=TeamWebhookResponseSerializer, description="The team's webhook target.")
    @extend_schema(
        methods=["PUT"], request=TeamWebhookSerializer, responses=TeamWebhookResponseSerializer,
        description="Set the webhook URL for re-evaluation diffs (signed with HMAC-SHA256; the secret is "
        "returned once when generated or rotated). Team admins only.",
    )
    @action(detail=True, methods=["get", "put"], pagination_class=None)
    def webhook(self, request: Request, pk: Any = None) -> Response:
        team = self.get_object()
        require_capability(request, team.id, Capability.MANAGE)
        body: dict[str, Any] = {}
        if request.method == "PUT":
            ser = TeamWebhookSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            secret = services.team_webhook_set(
                team=team, url=ser.validated_data["url"], rotate_secret=ser.validated_data["rotate_secret"]
            )
            if secret:
                body["secret"] = secret
        body.update({"url": team.webhook_url, "has_secret": bool(team.webhook_secret)})
        return Response(body)


class ApiTokenViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Your API tokens. POST returns the secret once; DELETE revokes (the row stays for audit)."""

    serializer_class = ApiTokenSerializer
    permission_classes = (permissions.IsAuthenticated,)
    throttle_scope = "token"

    def get_throttles(self) -> list[Any]:
        return [AtomicScopedRateThrottle()] if self.action == "create" else []  # holds under bursts (#23)

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        qs = ApiToken.objects.for_request(self.request).filter(user_id=self.request.user.pk or 0)
        return qs.select_related("team")

    @extend_schema(request=ApiTokenCreateSerializer, responses={201: ApiTokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        ser = ApiTokenCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        slug = ser.validated_data.get("team")
        if slug:
            team = Team.objects.for_request(request, Capability.TOKEN).filter(slug=slug).first()
            if team is None:
                return Response(
                    {"errors": {"team": ["no team with that slug where your role may hold tokens"]}, "status": 400},
                    status=400,
                )
        else:
            team = active_team(request, Capability.TOKEN)
            if team is None:
                return Response(
                    {"errors": {"team": ["your role cannot hold API tokens in any team"]}, "status": 403},
                    status=403,
                )
        token, raw = services.token_issue(user=request.user, team=team, name=ser.validated_data["name"],
                                          expires_at=ser.expiry())
        data = dict(ApiTokenSerializer(token).data)
        data["token"] = raw
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        services.token_revoke(token=instance, by=self.request.user)
