"""Planning API serializers: shape and type checks only; domain rules live in the services."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from engine.schema.bounds import bound_for
from engine.schema.enums import Fabric, TopologyKind
from engine.schema.fields import BY_PATH
from engine.schema.json_schema import field_schema, json_schema
from planning.api.fields import ScopedPrimaryKeyRelatedField
from planning.models import (
    CATALOG_KINDS,
    Catalog,
    CatalogItem,
    CatalogVersion,
    Fleet,
    ObjectChange,
    Scenario,
    Workload,
)
from planning.services.fleets import FLEET_BOUNDS  # fleet field -> the document field whose bound it shares


class TeamSlugMixin(serializers.Serializer):
    team: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)


# --- catalogs ------------------------------------------------------------------------------------------
class CatalogVersionBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = CatalogVersion
        fields = ("id", "number", "effective_date", "note", "created_at")
        read_only_fields = fields


class CatalogSerializer(TeamSlugMixin, serializers.ModelSerializer):
    is_global = serializers.BooleanField(read_only=True)
    latest_version = serializers.SerializerMethodField()
    fork_from = ScopedPrimaryKeyRelatedField(
        queryset=Catalog.objects.all(), write_only=True, required=False,
        help_text="Create the catalog as a fork of this catalog (latest version).",
    )

    class Meta:
        model = Catalog
        fields = ("id", "name", "description", "team", "is_global", "forked_from", "forked_from_version",
                  "latest_version", "fork_from", "created_at", "updated_at")
        read_only_fields = ("forked_from", "forked_from_version", "created_at", "updated_at")

    @extend_schema_field(CatalogVersionBriefSerializer(allow_null=True))
    def get_latest_version(self, obj: Catalog) -> dict[str, Any] | None:
        version = obj.latest_version()
        return CatalogVersionBriefSerializer(version).data if version else None


class CatalogForkSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False)
    version = ScopedPrimaryKeyRelatedField(
        queryset=CatalogVersion.objects.all(), required=False
    )


class CatalogVersionSerializer(serializers.ModelSerializer):
    item_count = serializers.SerializerMethodField()
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = CatalogVersion
        fields = ("id", "catalog", "number", "effective_date", "note", "created_by", "created_at", "item_count")
        read_only_fields = fields

    def get_item_count(self, obj: CatalogVersion) -> int:
        return obj.items.count()


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "800G transceiver price change",
            value={"catalog": 3, "key": "OSFP-800G-DR8", "kind": "transceiver", "name": "800G OSFP DR8",
                   "unit_price_usd": 1300.0, "power_w": 16.0, "specs": {"gbps": 800}, "source": "Q3 vendor quote",
                   "note": "Q3 quote from vendor"},
            request_only=True,
        )
    ]
)
class CatalogItemSerializer(serializers.ModelSerializer):
    catalog = serializers.IntegerField(source="version.catalog_id", read_only=True)
    version_number = serializers.IntegerField(source="version.number", read_only=True)
    kind = serializers.ChoiceField(choices=CATALOG_KINDS)
    note = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=500,
                                 help_text="Why (stored on the new catalog version).")

    class Meta:
        model = CatalogItem
        fields = ("id", "catalog", "version", "version_number", "key", "kind", "name", "unit_price_usd",
                  "power_w", "specs", "source", "note")
        read_only_fields = ("version",)
        extra_kwargs = {"name": {"required": False}, "source": {"required": False}}


class CatalogItemCreateSerializer(CatalogItemSerializer):
    catalog = ScopedPrimaryKeyRelatedField(  # type: ignore[assignment]
        queryset=Catalog.objects.all(), write_only=True,
                                           help_text="Team catalog to add the item to (creates a new version).")

    class Meta(CatalogItemSerializer.Meta):
        pass


class CsvImportSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="CSV with a header row.")
    note = serializers.CharField(required=False, allow_blank=True, max_length=500)


# --- fleets, workloads, scenarios ----------------------------------------------------------------------
# The document sections are JSON validated by the engine's one parser (through the services); their OpenAPI
# schema, choices and help come from the engine's one declaration of the document (engine.schema.fields).
def _help(path: str) -> str:
    """The declared help of a document field, with its bound (``fleet.server_count``: the bound alone)."""
    declared = BY_PATH.get(path)
    bound = bound_for(path)
    words = [declared.help] if declared is not None else []
    if bound is not None:
        words.append(f"{bound.describe()[0].upper()}{bound.describe()[1:]}")
    if declared is not None and declared.choices is not None:
        words.append("; ".join(f"{v}: {label}" for v, label in declared.choices.CHOICES))
    return ". ".join(words)


def _section_field(section: str, *, partial: bool = False) -> type[serializers.JSONField]:
    """A JSON field whose OpenAPI schema is the declared section (validation: the engine's parser)."""

    @extend_schema_field(json_schema(section, partial=partial))
    class SectionField(serializers.JSONField):
        pass

    SectionField.__name__ = f"{section.title()}SectionField"
    return SectionField


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "H100 pod",
            value={"name": "Ashburn H100", "site": "IAD-1", "server_model": "HGX-H100", "server_count": 128,
                   "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 400, "fabric": "infiniband",
                   "topology": "fat-tree", "oversubscription": 1.0},
            request_only=True,
        )
    ]
)
class FleetSerializer(TeamSlugMixin, serializers.ModelSerializer):
    gpus = serializers.IntegerField(read_only=True)
    # a fleet stands for a cluster section: its choices and help are the document's (engine.schema); the
    # service checks the numbers against the same bounds (planning.services.fleets)
    fabric = serializers.ChoiceField(choices=Fabric.choices(), required=False,
                                     help_text=_help("cluster.fabric"))
    topology = serializers.ChoiceField(choices=TopologyKind.choices(), required=False,
                                       help_text=_help("cluster.topology"))

    class Meta:
        model = Fleet
        fields = ("id", "team", "name", "site", "server_model", "server_count", "gpus_per_node", "nics_per_node",
                  "nic_gbps", "fabric", "topology", "oversubscription", "in_service_date", "notes", "gpus",
                  "created_at", "updated_at")
        read_only_fields = ("created_at", "updated_at")
        extra_kwargs = {name: {"help_text": _help(path)} for name, path in FLEET_BOUNDS.items()}


@extend_schema_field(field_schema("parallelism"))
class ParallelismField(serializers.JSONField):
    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not (value == "auto" or isinstance(value, dict)):
            raise serializers.ValidationError('must be "auto" or an object like {"tp": 8, "pp": 4, "dp": 16}')
        return value


class WorkloadSerializer(TeamSlugMixin, serializers.ModelSerializer):
    model = _section_field("model")()
    training = _section_field("training")()
    parallelism = ParallelismField(required=False, help_text=_help("parallelism"))

    class Meta:
        model = Workload
        fields = ("id", "team", "name", "description", "model", "training", "parallelism", "created_at",
                  "updated_at")
        read_only_fields = ("created_at", "updated_at")

    def validate_model(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value

    def validate_training(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class ScenarioSerializer(TeamSlugMixin, serializers.ModelSerializer):
    fleet = ScopedPrimaryKeyRelatedField(queryset=Fleet.objects.all(), required=False, allow_null=True)
    workload = ScopedPrimaryKeyRelatedField(queryset=Workload.objects.all())
    catalog = ScopedPrimaryKeyRelatedField(queryset=Catalog.objects.all(), required=False,
                                           allow_null=True, help_text="NULL = the global default catalog.")
    pinned_version = ScopedPrimaryKeyRelatedField(
        queryset=CatalogVersion.objects.all(), required=False,
        allow_null=True, help_text="NULL = follow the catalog's latest version.",
    )
    cluster = _section_field("cluster", partial=True)(
        required=False, help_text="The cluster, or the overrides of the fleet's (docs/scenario-format.md)")
    costs = _section_field("costs")(required=False)
    uncertainty = _section_field("uncertainty")(required=False)
    calibration_fleet = ScopedPrimaryKeyRelatedField(
        queryset=Fleet.objects.all(), required=False, allow_null=True,
        help_text="Borrow this fleet's calibration profile (hardware the team has not measured); the results say so.",
    )

    class Meta:
        model = Scenario
        fields = ("id", "team", "name", "description", "fleet", "cluster", "workload", "costs", "uncertainty",
                  "catalog", "pinned_version", "watched", "use_calibration", "calibration_fleet", "last_evaluated_at",
                  "created_at", "updated_at")
        read_only_fields = ("last_evaluated_at", "created_at", "updated_at")

    def _obj(self, value: Any, field: str) -> Any:
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value

    def validate_cluster(self, value: Any) -> Any:
        return self._obj(value, "cluster")

    def validate_costs(self, value: Any) -> Any:
        return self._obj(value, "costs")

    def validate_uncertainty(self, value: Any) -> Any:
        return self._obj(value, "uncertainty")


class ObjectChangeSerializer(serializers.ModelSerializer):
    class Meta:
        model = ObjectChange
        fields = ("id", "time", "user_name", "request_id", "action", "object_type", "object_id", "object_repr",
                  "prechange", "postchange", "diff")
        read_only_fields = fields
