"""Calibration API (issues #16, #23): measurement files per fleet and the fleet's fitted profiles.

* ``/api/v1/calibration-files/`` - upload (multipart ``file`` or JSON ``content``), list, read, delete;
  ``?fleet=<id>`` filters. An upload stores the file and answers **202** with the file (``status: pending``) and
  its import ``job`` (``/api/v1/runs/<id>/``: status, progress, cancel); the job reads it on a worker and sets
  ``status`` to ``ready`` (``summary`` filled) or ``failed`` (``error`` names the line: ``line N: reason``).
* ``/api/v1/calibration-files/batch/`` - several files (multipart, ``files`` repeated) and/or a manifest (the
  engine's, as JSON / YAML, or CSV) in one request (issue #24): each file its own import job; a bad file or manifest
  entry refuses the whole request with a 400 naming it, and nothing is stored.
* ``/api/v1/calibration-profiles/`` - POST queues a fit of the fleet's next profile version from its imported files
  and answers **202** with the fit job; the job's result names the version. GET lists the versions (fitted values
  with uncertainty, residual, per-run predicted vs measured); a single profile adds the full fit: nccl-tests curve
  points (measured, model, calibrated) and the data it came from. Profiles are immutable: a new fit is a new
  version.
* Both POSTs take an ``Idempotency-Key`` header: a retry with the key answers the first request's job (and so the
  same file, the same profile version), never a second one.

Lists never read a file's text or parsed rows, nor a profile's curves (``HEAVY_FIELDS`` deferred; the summaries
are stored beside them). Both belong to the fleet's team: reads need READ there, writes PLAN; other teams' ids
answer 404.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import TooManyFieldsSent, TooManyFilesSent
from django.db.models import Prefetch, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
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
from simulations.models import RunStatus, SimulationRun
from simulations.services.calibration import calibration_fit_submit, calibration_import_submit, jobs_by_id
from simulations.services.calibration_batch import (
    MAX_BATCH_FILES,
    calibration_batch_plan,
    calibration_batch_submit,
    read_batch_files,
)

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description="Any printable text (at most 200 characters) naming this request: a retry with the same key "
                "answers the first request's job instead of starting another.")


def job_url(request: Request | None, run_id: int) -> str:
    url = f"/api/v1/runs/{run_id}/"
    return request.build_absolute_uri(url) if request is not None else url


class CalibrationJobSerializer(serializers.ModelSerializer):
    """A calibration job (a run of kind ``cal-import`` or ``cal-fit``): where it is, and what it made."""

    url = serializers.SerializerMethodField()
    fleet = serializers.SerializerMethodField()
    upload = serializers.SerializerMethodField()
    profile = serializers.SerializerMethodField()
    version = serializers.SerializerMethodField()

    class Meta:
        model = SimulationRun
        fields = ("id", "url", "kind", "status", "progress", "progress_message", "error", "error_field", "fleet",
                  "upload", "profile", "version", "queued_at", "started_at", "finished_at")
        read_only_fields = fields

    def get_url(self, obj: SimulationRun) -> str:
        return job_url(self.context.get("request"), obj.pk)

    def get_fleet(self, obj: SimulationRun) -> int | None:
        return (obj.params or {}).get("fleet")

    def get_upload(self, obj: SimulationRun) -> int | None:
        return (obj.params or {}).get("upload")

    def get_profile(self, obj: SimulationRun) -> int | None:
        return (obj.result or {}).get("profile") if obj.status == RunStatus.SUCCEEDED else None

    def get_version(self, obj: SimulationRun) -> int | None:
        return (obj.result or {}).get("version") if obj.status == RunStatus.SUCCEEDED else None


class UploadJobSerializer(serializers.Serializer):
    """A file's import job, in brief (the whole job: ``url``)."""

    id = serializers.IntegerField()
    url = serializers.CharField()
    status = serializers.CharField()
    progress = serializers.IntegerField()
    progress_message = serializers.CharField()


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
    status = serializers.CharField(read_only=True, help_text="pending (its import job runs), ready or failed.")
    error = serializers.CharField(read_only=True, help_text='Why the import refused the file ("line N: reason").')
    summary = serializers.JSONField(read_only=True, help_text="What the importer read (empty until ready).")
    job = serializers.SerializerMethodField()

    class Meta:
        model = CalibrationUpload
        fields = ("id", "team", "fleet", "kind", "label", "filename", "size_bytes", "sha256", "scenario", "status",
                  "error", "summary", "job", "file", "content", "collective", "warmup_steps", "tokens_per_step", "gpus",
                  "created_at")
        read_only_fields = ("filename", "size_bytes", "sha256", "created_at")

    @extend_schema_field(UploadJobSerializer(allow_null=True))
    def get_job(self, obj: CalibrationUpload) -> dict[str, Any] | None:
        """The import job: id, url, status, progress (null for files imported before jobs existed)."""
        if not obj.job_id:
            return None
        jobs: dict[int, SimulationRun] | None = self.context.get("jobs")
        run = jobs.get(obj.job_id) if jobs is not None else SimulationRun.objects.filter(pk=obj.job_id).only(
            "id", "status", "progress", "progress_message").first()
        if run is None:
            return None
        return {"id": run.pk, "url": job_url(self.context.get("request"), run.pk), "status": run.status,
                "progress": run.progress, "progress_message": run.progress_message}


class _BatchFieldsSerializer(serializers.Serializer):
    fleet = ScopedPrimaryKeyRelatedField(queryset=Fleet.objects.all())
    kind = serializers.ChoiceField(choices=services.KINDS, required=False,
                                   help_text="The kind of every file the manifest does not name.")
    collective = serializers.CharField(required=False, allow_blank=True, max_length=40)
    warmup_steps = serializers.CharField(required=False, max_length=8)
    tokens_per_step = serializers.FloatField(required=False, min_value=1.0, max_value=1e12)
    gpus = serializers.IntegerField(required=False, min_value=1, max_value=10_000_000)


MANIFEST_HELP = ("The engine's calibration manifest (JSON or YAML: nccl / runs / telemetry entries naming the files), "
                 "or CSV with a row per file (file, kind, label, collective, ranks, nodes, scenario, warmup_steps, "
                 "tokens_per_step, gpus, format).")


class CalibrationBatchSerializer(_BatchFieldsSerializer):
    """Several files in one request (multipart), each its own import job; a manifest says what each one is."""

    files = serializers.ListField(child=serializers.FileField(allow_empty_file=True), allow_empty=False,
                                  help_text="The measurement files: repeat the field, one part per file.")
    manifest = serializers.FileField(required=False, allow_empty_file=True, help_text=MANIFEST_HELP)
    scenario = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False,
                                     help_text="Step logs the manifest does not name: the run's scenario (JSON).")


class BatchFileTextSerializer(serializers.Serializer):
    filename = serializers.CharField(max_length=200)
    content = serializers.CharField(trim_whitespace=False, allow_blank=True)


class CalibrationBatchJSONSerializer(_BatchFieldsSerializer):
    """The same as JSON: each file's name and text, the manifest as a document (or its text)."""

    files = serializers.ListField(child=BatchFileTextSerializer(), allow_empty=False, max_length=MAX_BATCH_FILES,
                                  help_text="Each file's name and text.")
    manifest = serializers.JSONField(required=False, help_text=MANIFEST_HELP + " A JSON object, or the text.")
    scenario = serializers.JSONField(required=False, allow_null=True,
                                     help_text="Step logs the manifest does not name: the run's scenario document.")


def _json_manifest(value: Any) -> tuple[str, bytes] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return "manifest", value.encode("utf-8")
    if isinstance(value, dict):
        return "manifest.json", json.dumps(value).encode("utf-8")
    raise serializers.ValidationError({"manifest": ["give the manifest as an object or as its text"]})


class CalibrationBatchResultSerializer(serializers.Serializer):
    files = CalibrationUploadSerializer(many=True, help_text="Each file as stored (pending) with its import job.")


class CalibrationUploadViewSet(TeamScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                               mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Calibration files of a fleet (nccl-tests output, step logs, GPU telemetry). Never reads their text."""

    queryset = (CalibrationUpload.objects.select_related("team", "fleet").defer(*CalibrationUpload.HEAVY_FIELDS)
                .order_by("-created_at", "-id"))
    serializer_class = CalibrationUploadSerializer
    filterset_class = CalibrationUploadFilterSet
    ordering_fields = ("created_at", "kind")
    parser_classes = (MultiPartParser, FormParser, JSONParser)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        rows = list(page if page is not None else self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "jobs": jobs_by_id([u.job_id for u in rows if u.job_id])}
        data = self.get_serializer_class()(rows, many=True, context=context).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(parameters=[IDEMPOTENCY_HEADER], responses={202: CalibrationUploadSerializer})
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
        upload, job, replayed = calibration_import_submit(
            fleet=fleet, user=request.user, kind=data["kind"], content=content, filename=filename,
            label=data.get("label", ""), scenario=data.get("scenario"), collective=data.get("collective") or None,
            warmup_steps=data.get("warmup_steps") or "auto", tokens_per_step=data.get("tokens_per_step"),
            gpus=data.get("gpus"), idempotency_key=request.headers.get("Idempotency-Key"),
        )
        body = self.get_serializer(upload, context={**self.get_serializer_context(), "jobs": {job.pk: job}}).data
        code = status.HTTP_200_OK if replayed and job.is_terminal else status.HTTP_202_ACCEPTED
        return Response(body, status=code, headers={"Location": job_url(request, job.pk)})

    @extend_schema(parameters=[IDEMPOTENCY_HEADER],
                   request={"multipart/form-data": CalibrationBatchSerializer,
                            "application/json": CalibrationBatchJSONSerializer},
                   responses={202: CalibrationBatchResultSerializer, 200: CalibrationBatchResultSerializer})
    @action(detail=False, methods=["post"], url_path="batch", parser_classes=(MultiPartParser, JSONParser))
    def batch(self, request: Request) -> Response:
        """Several files (repeated ``files``) and/or a manifest at once: each file stored and imported by its own
        job; a bad file refuses the whole request (400 naming ``files[i]`` or the manifest entry), nothing stored."""
        as_json = "json" in (request.content_type or "")
        form = CalibrationBatchJSONSerializer if as_json else CalibrationBatchSerializer
        try:
            payload = request.data
        except (TooManyFilesSent, TooManyFieldsSent) as exc:  # Django's own part limits: a 400, not a 500
            raise serializers.ValidationError({"files": [f"too many parts in one request ({exc})"]}) from None
        ser = form(data=payload, context=self.get_serializer_context())
        ser.is_valid(raise_exception=True)
        data = dict(ser.validated_data)
        fleet: Fleet = data["fleet"]
        require_capability(request, fleet.team_id, self.write_capability)
        if as_json:
            files = [(f["filename"], f["content"].encode("utf-8")) for f in data["files"]]
            manifest = _json_manifest(data.get("manifest"))
        else:
            files = read_batch_files(data["files"])
            manifest = services.read_upload(data["manifest"]) if data.get("manifest") is not None else None
        batch = calibration_batch_plan(
            files=files, manifest=manifest, kind=data.get("kind", ""), scenario=data.get("scenario") or None,
            collective=data.get("collective") or None, warmup_steps=data.get("warmup_steps") or "auto",
            tokens_per_step=data.get("tokens_per_step"), gpus=data.get("gpus"))
        stored, replayed = calibration_batch_submit(fleet=fleet, user=request.user, batch=batch, manifest=manifest,
                                                    idempotency_key=request.headers.get("Idempotency-Key"))
        context = {**self.get_serializer_context(), "jobs": {job.pk: job for _, job in stored}}
        body = {"files": CalibrationUploadSerializer([u for u, _ in stored], many=True, context=context).data}
        done = replayed and all(job.is_terminal for _, job in stored)
        return Response(body, status=status.HTTP_200_OK if done else status.HTTP_202_ACCEPTED)

    def perform_destroy(self, instance: CalibrationUpload) -> None:
        services.calibration_upload_delete(upload=instance, user=self.request.user)


class CalibrationProfileSerializer(TeamSlugMixin, serializers.ModelSerializer):
    fleet = ScopedPrimaryKeyRelatedField(queryset=Fleet.objects.all())
    uploads = ScopedPrimaryKeyRelatedField(queryset=CalibrationUpload.objects.all(), many=True, required=False,
                                           help_text="Files to fit (default: all of the fleet's imported files).")
    summary = serializers.JSONField(read_only=True, help_text="The fitted values with uncertainty, the residual "
                                                              "and the per-run errors (no curves).")

    class Meta:
        model = CalibrationProfile
        fields: tuple[str, ...] = ("id", "team", "fleet", "version", "name", "note", "uploads", "summary",
                                   "created_at", "created_by")
        read_only_fields = ("version", "created_at", "created_by")


class CalibrationProfileDetailSerializer(CalibrationProfileSerializer):
    profile = serializers.JSONField(read_only=True, help_text="The whole fit: curves, runs, sources, notes.")

    class Meta(CalibrationProfileSerializer.Meta):
        fields: tuple[str, ...] = (*CalibrationProfileSerializer.Meta.fields, "profile")


class CalibrationProfileViewSet(TeamScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                                viewsets.GenericViewSet):
    """A fleet's calibration profiles; POST queues a fit of the next version. Versions are immutable."""

    queryset = CalibrationProfile.objects.select_related("team", "fleet", "created_by").prefetch_related(
        Prefetch("uploads", queryset=CalibrationUpload.objects.only("id"))).order_by("fleet_id", "-version")
    serializer_class = CalibrationProfileSerializer
    filterset_class = CalibrationProfileFilterSet
    ordering_fields = ("created_at", "version")
    parser_classes = (JSONParser,)

    def get_queryset(self) -> QuerySet[CalibrationProfile]:
        qs = super().get_queryset()
        return qs if self.action == "retrieve" else qs.defer(*CalibrationProfile.HEAVY_FIELDS)

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return CalibrationProfileDetailSerializer if self.action == "retrieve" else CalibrationProfileSerializer

    @extend_schema(parameters=[IDEMPOTENCY_HEADER], request=CalibrationProfileSerializer,
                   responses={202: CalibrationJobSerializer, 200: CalibrationJobSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ser = CalibrationProfileSerializer(data=request.data, context=self.get_serializer_context())
        ser.is_valid(raise_exception=True)
        data = dict(ser.validated_data)
        fleet: Fleet = data["fleet"]
        require_capability(request, fleet.team_id, self.write_capability)
        uploads = data.get("uploads")
        job, replayed = calibration_fit_submit(fleet=fleet, user=request.user,
                                               uploads=list(uploads) if uploads else None, name=data.get("name", ""),
                                               note=data.get("note", ""),
                                               idempotency_key=request.headers.get("Idempotency-Key"))
        body = CalibrationJobSerializer(job, context=self.get_serializer_context()).data
        code = status.HTTP_200_OK if replayed and job.is_terminal else status.HTTP_202_ACCEPTED
        return Response(body, status=code, headers={"Location": job_url(request, job.pk)})


__all__ = ["CalibrationJobSerializer", "CalibrationProfileViewSet", "CalibrationUploadViewSet"]
