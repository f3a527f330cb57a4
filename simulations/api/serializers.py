"""Simulation API serializers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema_serializer,
)
from rest_framework import serializers

from planning.api.fields import ScopedPrimaryKeyRelatedField, StrictBooleanField
from planning.api.serializers import ScenarioSerializer
from planning.models import CatalogVersion, Scenario
from simulations.models import ReEvaluation, Report, RunKind, SimulationRun, Sweep


def api_url(serializer: serializers.Serializer, path: str) -> str:
    """Absolute URL of an API path (not ``reverse``: the portal reuses some route names)."""
    request = serializer.context.get("request")
    url = f"/api/v1/{path}"
    return request.build_absolute_uri(url) if request is not None else url


class SimulationRunSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    url = serializers.SerializerMethodField()
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = SimulationRun
        fields: tuple[str, ...] = ("id", "url", "team", "scenario", "sweep", "kind", "trigger", "label", "status", "progress",
                  "progress_message", "engine_version", "input_hash", "catalog_version", "params", "force",
                  "queued_at", "started_at", "finished_at", "duration_s", "attempts", "error", "error_field",
                  "reused_from", "created_by")
        read_only_fields: tuple[str, ...] = fields

    def get_url(self, obj: SimulationRun) -> str:
        return api_url(self, f"runs/{obj.pk}/")


class SimulationRunDetailSerializer(SimulationRunSerializer):
    class Meta(SimulationRunSerializer.Meta):
        fields = (*SimulationRunSerializer.Meta.fields, "result", "input_snapshot")
        read_only_fields = fields


class _RunOptions(serializers.Serializer):
    kind = serializers.ChoiceField(choices=RunKind.choices, default=RunKind.TCO)
    force = StrictBooleanField(default=False, help_text="Recompute even if an identical result exists.")
    params = serializers.DictField(required=False, default=dict,
                                   help_text="search: top_k; tco: monte_carlo, sensitivity, seed.")


@extend_schema_serializer(
    examples=[OpenApiExample("TCO with Monte Carlo", value={"kind": "tco", "params": {"monte_carlo": 500}},
                             request_only=True)]
)
class RunSubmitForScenarioSerializer(_RunOptions):
    pass


class RunSubmitSerializer(_RunOptions):
    scenario = ScopedPrimaryKeyRelatedField(queryset=Scenario.objects.all())


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "NIC speed x fabric",
            value={"kind": "tco", "axes": {"cluster.nic_gbps": [200, 400, 800],
                                           "cluster.fabric": ["infiniband", "roce"]}},
            request_only=True,
        )
    ]
)
class SweepForScenarioSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=RunKind.choices, default=RunKind.TCO)
    axes = serializers.DictField(help_text="Dotted document path → list of values; cartesian product.")
    params = serializers.DictField(required=False, default=dict)


class SweepSubmitSerializer(SweepForScenarioSerializer):
    scenario = ScopedPrimaryKeyRelatedField(queryset=Scenario.objects.all())


class SweepSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    url = serializers.SerializerMethodField()
    runs_url = serializers.SerializerMethodField()

    class Meta:
        model = Sweep
        fields = ("id", "url", "runs_url", "team", "scenario", "name", "kind", "axes", "status", "total_runs",
                  "summary", "created_at", "finished_at")
        read_only_fields = fields

    def get_url(self, obj: Sweep) -> str:
        return api_url(self, f"sweeps/{obj.pk}/")

    def get_runs_url(self, obj: Sweep) -> str:
        return api_url(self, f"runs/?sweep={obj.pk}")


class ReportSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    runs = ScopedPrimaryKeyRelatedField(queryset=SimulationRun.objects.all(), many=True)
    baseline = ScopedPrimaryKeyRelatedField(queryset=SimulationRun.objects.all(), required=False)
    metrics = serializers.ListField(child=serializers.CharField(max_length=120), required=False)

    class Meta:
        model = Report
        fields = ("id", "team", "name", "description", "runs", "baseline", "metrics", "created_at", "updated_at")
        read_only_fields = ("created_at", "updated_at")


class ReEvaluationSerializer(serializers.ModelSerializer):
    class Meta:
        model = ReEvaluation
        fields = ("id", "scenario", "capacity_plan", "previous_run", "new_run", "reasons", "changes", "summary",
                  "created_at",
                  "completed_at", "delivery_status", "delivery_attempts", "delivered_at", "delivery_error")
        read_only_fields = fields


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "Llama-3-70B on 1,024 H100",
            value={"document": {
                "model": {"name": "Llama-3-70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                          "ffn_hidden": 28672, "gated_ffn": True, "vocab": 128256, "seq_len": 8192},
                "training": {"global_batch": 2048, "tokens": 15e12, "precision": "bf16"},
                "parallelism": "auto",
                "cluster": {"gpu": "H100-SXM", "gpus": 1024, "gpus_per_node": 8, "nics_per_node": 8,
                            "nic_gbps": 400, "fabric": "infiniband", "topology": "fat-tree"},
            }},
            request_only=True,
        )
    ]
)
class PreviewRequestSerializer(serializers.Serializer):
    document = serializers.DictField(required=False, help_text="A full engine scenario document.")
    scenario = ScopedPrimaryKeyRelatedField(queryset=Scenario.objects.all(), required=False,
                                            help_text="Or a saved scenario, optionally with overrides.")
    overrides = serializers.DictField(required=False, default=dict,
                                      help_text='Dotted path → value, e.g. {"cluster.nic_gbps": 800}.')
    catalog_version = ScopedPrimaryKeyRelatedField(queryset=CatalogVersion.objects.all(), required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("document") and not attrs.get("scenario"):
            raise serializers.ValidationError({"document": ["give a document or a scenario"]})
        return attrs


class ScenarioWithStudySerializer(ScenarioSerializer):
    """The planning API's scenario plus the fabric study it is pinned to (issue #13; runs live in this app)."""

    fabric_study_run = ScopedPrimaryKeyRelatedField(
        queryset=SimulationRun.objects.all(), required=False, allow_null=True,
        help_text="Pin the scenario to one of its team's succeeded fabric-study runs (kind \"fabric\"): the "
                  "performance model then takes the routing share of the scenario's routing from that study "
                  "instead of the shipped tables. null = unpin.",
    )
    fabric_study = serializers.JSONField(
        read_only=True, help_text="The pinned study as it travels in the engine document (compact routing shares, "
                                  "the study's inputs and run id); {} when not pinned.",
    )

    class Meta(ScenarioSerializer.Meta):
        fields: tuple[str, ...] = (*ScenarioSerializer.Meta.fields, "fabric_study_run", "fabric_study")  # type: ignore[assignment]

    def to_representation(self, instance: Any) -> Any:
        data = super().to_representation(instance)
        data["fabric_study_run"] = (instance.fabric_study or {}).get("run")
        return data
