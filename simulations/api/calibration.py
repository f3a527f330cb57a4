"""Calibration API (issue #16): measurement files per fleet and the fleet's fitted profiles.

* ``/api/v1/calibration-files/`` - upload (multipart ``file`` or JSON ``content``), list, read, delete;
  ``?fleet=<id>`` filters. A malformed file is a 400 naming ``file`` with the importer's line and reason.
* ``/api/v1/calibration-profiles/`` - POST fits the fleet's next profile version from its files; GET lists
  the versions (fitted values with uncertainty, residual, per-run predicted vs measured); a single profile
  adds the full fit: nccl-tests curve points (measured, model, calibrated) and the data it came from.
  Profiles are immutable: a new fit is a new version.

Both belong to the fleet's team: reads need READ there, writes PLAN; other teams' ids answer 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.permissions import TeamScopedViewSetMixin
from accounts.scoping import require_capability
from core.api.parsers import SafeFormParser as FormParser
from core.api.parsers import SafeJSONParser as JSONParser
from core.api.parsers import SafeMultiPartParser as MultiPartParser
from planning.api.fields import ScopedPrimaryKeyRelatedField
from planning.api.serializers import TeamSlugMixin
from planning.models import CalibrationProfile, CalibrationUpload, Fleet
from planning.services import calibration as services
from simulations.api.filtersets import CalibrationProfileFilterSet, CalibrationUploadFilterSet
from simulations.services.calibration import calibration_fit_and_reevaluate


class CalibrationUploadSerializer(TeamSlugMixin, serializers.ModelSerializer):
    fleet = ScopedPrimaryKeyRelatedField(queryset=Fleet.objects.all())
    kind = serializers.ChoiceField(choices=services.KINDS)
    file = serializers.FileField(write_only=True, required=False, help_text="The measurement file (text).")
    content = serializers.CharField(write_only=True, required=False, trim_whitespace=False,
                                    help_text="The file's text, instead of a multipart file.")
    scenario = serializers.JSONField(required=False, allow_null=True,
                                     help_text="Step logs: the run's scenario document (model, training, "
                                               "parallelism as it ran; cluster defaults to the fleet's).")
    collective = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=40)
    warmup_steps = serializers.CharField(write_only=True, required=False, max_length=8,
                                         help_text='"auto" (default) or the number of leading steps to drop.')
    tokens_per_step = serializers.FloatField(write_only=True, required=False, min_value=1.0, max_value=1e12)
    gpus = serializers.IntegerField(write_only=True, required=False, min_value=1, max_value=10_000_000)
    summary = serializers.SerializerMethodField()

    class Meta:
        model = CalibrationUpload
        fields = ("id", "team", "fleet", "kind", "label", "filename", "size_bytes", "sha256", "scenario", "summary",
                  "file", "content", "collective", "warmup_steps", "tokens_per_step", "gpus", "created_at")
        read_only_fields = ("filename", "size_bytes", "sha256", "created_at")

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_summary(self, obj: CalibrationUpload) -> dict[str, Any]:
        p = obj.parsed or {}
        if obj.kind == "nccl-tests":
            return {k: p.get(k) for k in ("collective", "collective_source", "ranks", "nodes", "nccl_version",
                                          "complete", "warnings", "avg_busbw_gbytes_s")} | {"rows": len(p.get("rows", []))}
        if obj.kind == "step-log":
            return {k: p.get(k) for k in ("format", "step_time_s", "step_time_sem_rel", "steps_used",
                                          "warmup_excluded", "tflops_per_gpu", "notes")}
        return {k: v for k, v in p.items() if k != "per_gpu"}


class CalibrationUploadViewSet(TeamScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                               mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Calibration files of a fleet (nccl-tests output, step logs, GPU telemetry)."""

    queryset = CalibrationUpload.objects.select_related("team", "fleet").order_by("-created_at", "-id")
    serializer_class = CalibrationUploadSerializer
    filterset_class = CalibrationUploadFilterSet
    ordering_fields = ("created_at", "kind")
    parser_classes = (MultiPartParser, FormParser, JSONParser)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ser = self.get_serializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = dict(ser.validated_data)
        fleet: Fleet = data["fleet"]
        require_capability(request, fleet.team_id, self.write_capability)
        if data.get("file") is not None:
            filename, content = services.read_upload(data["file"])
        elif data.get("content") is not None:
            filename, content = "", data["content"]
        else:
            raise serializers.ValidationError({"file": ["give a file (multipart) or content (text)"]})
        warmup: int | str = data.get("warmup_steps") or "auto"
        if warmup != "auto":
            try:
                warmup = int(str(warmup))
            except ValueError:
                raise serializers.ValidationError({"warmup_steps": ['must be "auto" or an integer']}) from None
        upload = services.calibration_upload_create(
            fleet=fleet, user=request.user, kind=data["kind"], content=content, filename=filename,
            label=data.get("label", ""), scenario=data.get("scenario"), collective=data.get("collective") or None,
            warmup_steps=warmup, tokens_per_step=data.get("tokens_per_step"), gpus=data.get("gpus"),
        )
        return Response(self.get_serializer(upload).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: CalibrationUpload) -> None:
        services.calibration_upload_delete(upload=instance, user=self.request.user)


class CalibrationProfileSerializer(TeamSlugMixin, serializers.ModelSerializer):
    fleet = ScopedPrimaryKeyRelatedField(queryset=Fleet.objects.all())
    uploads = ScopedPrimaryKeyRelatedField(queryset=CalibrationUpload.objects.all(), many=True, required=False,
                                           help_text="Files to fit (default: all of the fleet's files).")
    summary = serializers.SerializerMethodField()

    class Meta:
        model = CalibrationProfile
        fields: tuple[str, ...] = ("id", "team", "fleet", "version", "name", "note", "uploads", "summary",
                                   "created_at", "created_by")
        read_only_fields = ("version", "created_at", "created_by")

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_summary(self, obj: CalibrationProfile) -> dict[str, Any]:
        return services.profile_summary(profile=obj)


class CalibrationProfileDetailSerializer(CalibrationProfileSerializer):
    profile = serializers.JSONField(read_only=True, help_text="The whole fit: curves, runs, sources, notes.")

    class Meta(CalibrationProfileSerializer.Meta):
        fields: tuple[str, ...] = (*CalibrationProfileSerializer.Meta.fields, "profile")


class CalibrationProfileViewSet(TeamScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                                viewsets.GenericViewSet):
    """A fleet's calibration profiles; POST fits the next version. Versions are immutable."""

    queryset = CalibrationProfile.objects.select_related("team", "fleet", "created_by").prefetch_related(
        "uploads").order_by("fleet_id", "-version")
    serializer_class = CalibrationProfileSerializer
    filterset_class = CalibrationProfileFilterSet
    ordering_fields = ("created_at", "version")
    parser_classes = (JSONParser,)

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return CalibrationProfileDetailSerializer if self.action == "retrieve" else CalibrationProfileSerializer

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ser = CalibrationProfileSerializer(data=request.data, context=self.get_serializer_context())
        ser.is_valid(raise_exception=True)
        data = dict(ser.validated_data)
        fleet: Fleet = data["fleet"]
        require_capability(request, fleet.team_id, self.write_capability)
        uploads = data.get("uploads")
        profile = calibration_fit_and_reevaluate(fleet=fleet, user=request.user,
                                                 uploads=list(uploads) if uploads else None,
                                                 name=data.get("name", ""), note=data.get("note", ""))
        return Response(CalibrationProfileDetailSerializer(profile, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)


__all__ = ["CalibrationProfileViewSet", "CalibrationUploadViewSet"]
