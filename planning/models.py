"""Planning domain: vendor catalogs (versioned), fleets, workloads, scenarios and the change log.

Catalogs are the one place with a *nullable* team: the global default catalog (team NULL) is readable by
everyone and writable by nobody; teams fork it. A catalog version and its items are immutable once
created; an edit produces a new version (see ``services.catalog_item_update``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q

from accounts.models import Team
from accounts.scoping import AuditedModel, TeamOwnedModel
from accounts.visibility import TeamQuerySet
from engine.schema.enums import Fabric, TopologyKind

CATALOG_KINDS = ("gpu", "server", "nic", "switch", "transceiver", "cable", "facility", "reliability")
CATALOG_KIND_CHOICES = [(k, k) for k in CATALOG_KINDS]
# One definition of each enum, with its labels: the engine's (what a cluster can be). Not copied here.
FABRIC_CHOICES = Fabric.choices()
TOPOLOGY_CHOICES = TopologyKind.choices()


# --- Catalogs ------------------------------------------------------------------------------------------
class Catalog(AuditedModel):
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    forked_from_version = models.ForeignKey(
        "CatalogVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    # the visibility rule (accounts.visibility): team catalogs for their teams, the global one readable by all
    team_path = "team"
    public_rows = Q(team__isnull=True)
    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering: ClassVar = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_global(self) -> bool:
        return self.team_id is None

    def latest_version(self) -> CatalogVersion | None:
        return self.versions.order_by("-number").first()


class CatalogVersion(models.Model):
    """An immutable snapshot of a catalog's items. Editing a catalog creates the next number."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    effective_date = models.DateField()
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    team_path = "catalog__team"
    public_rows = Q(catalog__team__isnull=True)
    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering: ClassVar = ["catalog_id", "-number"]
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["catalog", "number"], name="uniq_catalog_version_number")
        ]

    def __str__(self) -> str:
        return f"{self.catalog.name} v{self.number}"

    @property
    def team_id(self) -> int | None:
        return self.catalog.team_id


class CatalogItem(models.Model):
    version = models.ForeignKey(CatalogVersion, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=80)
    kind = models.CharField(max_length=16, choices=CATALOG_KIND_CHOICES)
    name = models.CharField(max_length=200)
    unit_price_usd = models.FloatField(null=True, blank=True)
    power_w = models.FloatField(null=True, blank=True)
    specs = models.JSONField(default=dict, blank=True)
    source = models.TextField(blank=True)

    team_path = "version__catalog__team"
    public_rows = Q(version__catalog__team__isnull=True)
    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering: ClassVar = ["kind", "key"]
        constraints: ClassVar = [models.UniqueConstraint(fields=["version", "key"], name="uniq_catalog_item_key")]

    def __str__(self) -> str:
        return f"{self.key} ({self.kind})"

    @property
    def team_id(self) -> int | None:
        return self.version.catalog.team_id

    def as_engine_item(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "name": self.name,
            "unit_price_usd": self.unit_price_usd,
            "power_w": self.power_w,
            "specs": self.specs or {},
            "source": self.source,
        }


# --- Fleets, workloads, scenarios ----------------------------------------------------------------------
class Fleet(TeamOwnedModel):
    """Servers a team owns or plans to buy; a scenario may take its cluster from a fleet."""

    name = models.CharField(max_length=120)
    site = models.CharField(max_length=120, blank=True)
    server_model = models.CharField(max_length=80, help_text="Catalog key of a server item.")
    server_count = models.PositiveIntegerField()
    gpus_per_node = models.PositiveIntegerField(default=8)
    nics_per_node = models.PositiveIntegerField(default=8)
    nic_gbps = models.PositiveIntegerField(default=400)
    fabric = models.CharField(max_length=32, default="infiniband", choices=FABRIC_CHOICES)
    topology = models.CharField(max_length=32, default="fat-tree", choices=TOPOLOGY_CHOICES)
    oversubscription = models.FloatField(default=1.0)
    in_service_date = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True)


    class Meta(TeamOwnedModel.Meta):
        indexes: ClassVar = [models.Index(fields=["team", "name"])]

    def __str__(self) -> str:
        return self.name

    @property
    def gpus(self) -> int:
        return self.server_count * self.gpus_per_node


def default_parallelism() -> str:
    return "auto"


class Workload(TeamOwnedModel):
    """A model to train: architecture (``model``), run (``training``) and parallelism (dict or "auto")."""

    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    model = models.JSONField(default=dict)
    training = models.JSONField(default=dict)
    parallelism = models.JSONField(default=default_parallelism)


    def __str__(self) -> str:
        return self.name


class Scenario(TeamOwnedModel):
    """A workload on a cluster (a fleet or an ad-hoc cluster document) priced with a catalog version.

    ``catalog`` NULL means the global default catalog; ``pinned_version`` NULL means follow the
    catalog's latest version.
    """

    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    fleet = models.ForeignKey(Fleet, null=True, blank=True, on_delete=models.PROTECT, related_name="scenarios")
    cluster = models.JSONField(default=dict, blank=True, help_text="Ad-hoc cluster, or overrides on the fleet.")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="scenarios")
    costs = models.JSONField(default=dict, blank=True)
    uncertainty = models.JSONField(default=dict, blank=True)
    catalog = models.ForeignKey(Catalog, null=True, blank=True, on_delete=models.PROTECT, related_name="scenarios")
    pinned_version = models.ForeignKey(
        CatalogVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="pinned_scenarios"
    )
    watched = models.BooleanField(default=False, help_text="Re-evaluate when its inputs change.")
    last_evaluated_at = models.DateTimeField(null=True, blank=True)
    last_evaluated_hash = models.CharField(max_length=64, blank=True)
    use_calibration = models.BooleanField(
        default=True, help_text="Use the fleet's calibration profile (its own, or calibration_fleet's) when set."
    )
    calibration_fleet = models.ForeignKey(
        Fleet, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Borrow this fleet's calibration profile (hardware the team does not own or has not measured).",
    )
    fabric_study = models.JSONField(
        default=dict, blank=True,
        help_text="A fabric study pinned to the scenario (issue #13): the compact routing shares of one of the "
                  "team's succeeded fabric-study runs (engine.fabric.pinned_study). Empty = the shipped tables.",
    )


    def __str__(self) -> str:
        return self.name


# --- Change log ----------------------------------------------------------------------------------------
class ObjectChange(models.Model):
    """Who changed what and when, with before/after snapshots and the diff of changed keys."""

    class Action(models.TextChoices):
        CREATE = "create", "Created"
        UPDATE = "update", "Updated"
        DELETE = "delete", "Deleted"

    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    user_name = models.CharField(max_length=150, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    time = models.DateTimeField(auto_now_add=True, db_index=True)
    action = models.CharField(max_length=8, choices=Action.choices)
    object_type = models.CharField(max_length=32, db_index=True)
    object_id = models.BigIntegerField(db_index=True)
    object_repr = models.CharField(max_length=200)
    prechange = models.JSONField(null=True, blank=True)
    postchange = models.JSONField(null=True, blank=True)
    diff = models.JSONField(default=dict, blank=True)

    # the teams' own history, plus the global catalog's (readable by all)
    public_rows = Q(team__isnull=True, object_type="catalog")
    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering: ClassVar = ["-time", "-id"]
        indexes: ClassVar = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type} #{self.object_id}"


# --- Calibration (issue #16) ---------------------------------------------------------------------------
class CalibrationUpload(TeamOwnedModel):
    """A measurement file of a fleet: nccl-tests output, a training step log or GPU telemetry.

    Kept as text (``content``, stored by the upload request) with what the engine's importer read from it: the
    import job (issue #23) writes ``parsed`` (what a fit needs: nccl-tests rows, a step log's aggregates, never
    its per-step rows) and ``summary`` (the few figures lists show) and sets ``status``. Lists and pages never
    load ``content`` or ``parsed`` (``HEAVY_FIELDS``). The importers read numbers with int/float only, nothing in a
    file is executed. Step logs carry the run's scenario document.
    """

    class Kind(models.TextChoices):
        NCCL_TESTS = "nccl-tests", "nccl-tests output"
        STEP_LOG = "step-log", "Training step log"
        TELEMETRY = "telemetry", "GPU telemetry (nvidia-smi / DCGM)"

    class Status(models.TextChoices):
        PENDING = "pending", "Importing"
        READY = "ready", "Imported"
        FAILED = "failed", "Refused"

    HEAVY_FIELDS = ("content", "parsed")  # megabytes per row: never in a list query

    fleet = models.ForeignKey(Fleet, on_delete=models.CASCADE, related_name="calibration_uploads")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    label = models.CharField(max_length=120, blank=True)
    filename = models.CharField(max_length=200, blank=True)
    size_bytes = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    content = models.TextField()
    parsed = models.JSONField(default=dict)
    scenario = models.JSONField(null=True, blank=True, help_text="Step logs: the run's scenario document.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    options = models.JSONField(default=dict, blank=True,
                               help_text="Importer options: collective, warmup_steps, tokens_per_step, gpus.")
    summary = models.JSONField(default=dict, blank=True, help_text="What the importer read, in a few figures.")
    error = models.TextField(blank=True, help_text="Why the import refused the file (\"line N: ...\").")
    job_id = models.PositiveBigIntegerField(null=True, blank=True,
                                            help_text="The import job: a simulations run of kind cal-import.")

    class Meta(TeamOwnedModel.Meta):
        indexes: ClassVar = [models.Index(fields=["fleet", "kind"])]

    def __str__(self) -> str:
        return self.label or self.filename or f"calibration file {self.pk}"


class CalibrationProfile(TeamOwnedModel):
    """A fitted calibration of a fleet (immutable; a new fit is the next ``version``).

    ``profile`` is ``engine.calibration.Profile.to_dict()`` plus the files it came from.
    """

    fleet = models.ForeignKey(Fleet, on_delete=models.CASCADE, related_name="calibration_profiles")
    version = models.PositiveIntegerField()
    name = models.CharField(max_length=120, blank=True)
    note = models.CharField(max_length=500, blank=True)
    profile = models.JSONField(default=dict)
    summary = models.JSONField(default=dict, blank=True,
                               help_text="The fitted values with uncertainty, the residual and per-run errors (no curves).")
    uploads = models.ManyToManyField(CalibrationUpload, related_name="profiles", blank=True)

    HEAVY_FIELDS = ("profile",)  # curves of every file: never in a list query

    class Meta(TeamOwnedModel.Meta):
        ordering: ClassVar = ["fleet_id", "-version"]
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["fleet", "version"], name="uniq_calibration_profile_version")
        ]

    def __str__(self) -> str:
        return f"{self.fleet.name} calibration v{self.version}"


# --- Capacity plans (issue #14) ------------------------------------------------------------------------
class CapacityPlan(TeamOwnedModel):
    """A fleet over time against a demand plan: the engine's plan document (``engine.fleet``).

    ``document`` holds clusters (with in-service and retire days), named jobs, arrival streams, policy,
    failures, costs and purchase candidates, validated by the engine's plan parser on every save. Runs of a
    plan are ordinary simulation runs of kind ``fleet`` (see ``simulations.services.fleet``).
    """

    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    document = models.JSONField(default=dict)
    # {cluster name: fleet id}: clusters that stand for one of the team's fleets; a run takes their GPU type,
    # count, NICs, fabric and topology from the fleet as it is then (planning.services.capacity_plans).
    cluster_fleets = models.JSONField(default=dict, blank=True)
    # the catalog whose prices and specs runs use (empty: the global default); a watched plan re-runs on a new version
    catalog = models.ForeignKey(Catalog, null=True, blank=True, on_delete=models.PROTECT,
                                related_name="capacity_plans")
    watched = models.BooleanField(
        default=False, help_text="Re-run on schedule when the catalog, a fleet it uses or the engine changes.")
    last_evaluated_at = models.DateTimeField(null=True, blank=True)


    class Meta(TeamOwnedModel.Meta):
        indexes: ClassVar = [models.Index(fields=["team", "name"], name="capplan_team_name_idx")]

    def __str__(self) -> str:
        return self.name
