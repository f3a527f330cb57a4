from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from accounts.models import ApiToken, Membership, Team, User
from accounts.roles import Role


class TeamSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField()

    class Meta:
        model = Team
        fields = ("id", "name", "slug", "role", "created_at")
        read_only_fields = fields

    def get_role(self, obj: Team) -> str | None:
        user = self.context["request"].user
        m = next((m for m in user.memberships.all() if m.team_id == obj.id), None)
        return m.role if m else None


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    user = serializers.SlugRelatedField(slug_field="username", queryset=User.objects.all(), write_only=True)
    role = serializers.ChoiceField(choices=Role.choices)

    class Meta:
        model = Membership
        fields = ("id", "user", "username", "role", "created_at")
        read_only_fields = ("id", "username", "created_at")


class MeSerializer(serializers.ModelSerializer):
    teams = serializers.SerializerMethodField()
    # Users may have no e-mail address: a plain string, not the "email" format (which forbids "").
    email = serializers.CharField(read_only=True, allow_blank=True)

    class Meta:
        model = User
        fields = ("id", "username", "email", "display_name", "teams")
        read_only_fields = fields

    def get_teams(self, obj: User) -> list[dict[str, Any]]:
        return [
            {"id": m.team_id, "slug": m.team.slug, "name": m.team.name, "role": m.role}
            for m in obj.memberships.select_related("team")
        ]


class ApiTokenSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = ApiToken
        fields: tuple[str, ...] = ("id", "name", "team", "prefix", "created_at", "last_used_at", "revoked_at", "expires_at")
        read_only_fields = ("id", "team", "prefix", "created_at", "last_used_at", "revoked_at")


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    team = serializers.SlugField(required=False, help_text="Team slug; defaults to your active team.")
    expires_in_days = serializers.IntegerField(required=False, min_value=1, max_value=730,
                                               help_text="Expire after this many days (1-730).")
    expires_at = serializers.DateTimeField(required=False, help_text="Expire at this time (ISO 8601).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "expires_in_days" in attrs and "expires_at" in attrs:
            raise serializers.ValidationError({"expires_in_days": ["give expires_in_days or expires_at, not both"]})
        return attrs

    def expiry(self) -> Any:
        """The expiry the request asks for (None: the token does not expire)."""
        data = self.validated_data
        if data.get("expires_in_days"):
            return timezone.now() + timedelta(days=int(data["expires_in_days"]))
        return data.get("expires_at")


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown once; store it now.")

    class Meta(ApiTokenSerializer.Meta):
        fields: tuple[str, ...] = (*ApiTokenSerializer.Meta.fields, "token")


class TeamWebhookSerializer(serializers.Serializer):
    """PUT body: the target URL, and whether to rotate the signing secret."""

    url = serializers.CharField(allow_blank=True, max_length=500, help_text='https URL; "" turns delivery off.')
    rotate_secret = serializers.BooleanField(default=False)


class TeamWebhookResponseSerializer(serializers.Serializer):
    url = serializers.CharField()
    has_secret = serializers.BooleanField()
    secret = serializers.CharField(required=False, help_text="Present once: when generated or rotated.")
