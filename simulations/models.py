"""Simulation jobs and what they produce: runs, sweeps, saved reports, re-evaluation diffs.

A :class:`SimulationRun` row is the source of truth for a job (the Celery result backend is not). Its
``input_snapshot`` holds the fully resolved engine document *and* the catalog values used, hashed into
``input_hash``; its result is written once, together with its final status, in one transaction.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models

from accounts.scoping import TeamOwnedModel


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)


class RunKind(models.TextChoices):
    PREDICT = "predict", "Predict"
    SEARCH = "search", "Search parallelism"
    TCO = "tco", "Total cost of ownership"
    FABRIC = "fabric", "Fabric study"  # flow-level simulation of collective traffic (engine.flowsim)
    FLEET = "fleet", "Capacity plan"  # fleet simulation over months (engine.fleet), issue #14


class JobKind(models.TextChoices):
    """Run kinds that are jobs on a team's own data rather than engine runs of a document (issue #23): they use the
    run machinery (claim, lease, heartbeat, reaper, idempotency, progress, cancel) but are not submitted as
    scenario runs or sweeps (``RunKind`` stays the kinds a scenario can be run as)."""

    CALIBRATION_IMPORT = "cal-import", "Calibration file import"  # parse + summarise one uploaded file
    CALIBRATION_FIT = "cal-fit", "Calibration fit"  # fit a fleet's next profile version


KIND_CHOICES = [*RunKind.choices, *JobKind.choices]


class RunTrigger(models.TextChoices):
    MANUAL = "manual", "Manual"
    SWEEP = "sweep", "Sweep"
    REEVALUATION = "reevaluation", "Scheduled re-evaluation"


class Sweep(TeamOwnedModel):
    """A scenario evaluated over the cartesian product of ``axes`` (dotted document paths → values)."""

    scenario = models.ForeignKey(
        "planning.Scenario", null=True, blank=True, on_delete=models.SET_NULL, related_name="sweeps"
    )
    name = models.CharField(max_length=120, blank=True)
    kind = models.CharField(max_length=8, choices=RunKind.choices, default=RunKind.TCO)
    axes = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    total_runs = models.PositiveIntegerField(default=0)
    summary = models.JSONField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)


    def __str__(self) -> str:
        return self.name or f"Sweep #{self.pk}"


class SimulationRun(TeamOwnedModel):
    scenario = models.ForeignKey(
        "planning.Scenario", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    sweep = models.ForeignKey(Sweep, null=True, blank=True, on_delete=models.CASCADE, related_name="runs")
    catalog_version = models.ForeignKey(
        "planning.CatalogVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    kind = models.CharField(max_length=16, choices=KIND_CHOICES, default=RunKind.TCO)
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices, default=RunTrigger.MANUAL)
    label = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    progress = models.PositiveSmallIntegerField(default=0)
    progress_message = models.CharField(max_length=200, blank=True)

    input_snapshot = models.JSONField(default=dict)
    input_hash = models.CharField(max_length=64, db_index=True)
    engine_version = models.CharField(max_length=32)
    params = models.JSONField(default=dict, blank=True, help_text="Engine options: top_k, monte_carlo, ...")
    force = models.BooleanField(default=False)
    # team:kind:engine_version:input_hash for manual submissions (None for sweep children and re-evaluations).
    # Unique while the run is queued or running (constraint below): of N concurrent identical submissions one
    # row wins and the others answer the winner's id (services.runs.run_submit).
    idempotency_key = models.CharField(max_length=160, null=True, blank=True, editable=False)  # noqa: DJ001 (NULLs never collide in the unique constraint)

    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, db_index=True)
    claim_token = models.CharField(max_length=40, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)

    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=120, blank=True)
    result = models.JSONField(null=True, blank=True)
    reused_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reused_by"
    )


    class Meta(TeamOwnedModel.Meta):
        indexes: ClassVar = [
            models.Index(fields=["input_hash", "engine_version", "kind", "status"], name="run_idem_idx"),
            models.Index(fields=["status", "heartbeat_at"], name="run_stuck_idx"),
        ]
        constraints: ClassVar = [
            models.UniqueConstraint(
                fields=["idempotency_key"],
                condition=models.Q(status__in=[str(s) for s in ACTIVE_STATUSES]),
                name="run_active_idempotency_key_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"Run #{self.pk} ({self.kind}, {self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class RunEvent(models.Model):
    """What happened to a run's claim, one row per event (append-only): who claimed it and when, leases that lapsed,
    messages re-sent, claims lost, the end. Recovery after a dead worker reads off these timestamps."""

    class Kind(models.TextChoices):
        CLAIMED = "claimed", "Claimed by an execution"
        LEASE_LAPSED = "lease-lapsed", "Lease lapsed; re-queued by the reaper"
        REDISPATCHED = "redispatched", "Message re-sent by the reaper"
        RELEASED = "released", "Released for a retry"
        LOST = "lost", "Execution lost its claim and stopped"
        FINISHED = "finished", "Finished"

    run = models.ForeignKey(SimulationRun, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    attempt = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the execution, or 'reaper'.")
    message = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering: ClassVar = ["at", "id"]
        indexes: ClassVar = [models.Index(fields=["run", "at"], name="run_event_run_at_idx")]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.kind} at {self.at:%Y-%m-%d %H:%M:%S}"


class Report(TeamOwnedModel):
    """A saved side-by-side comparison of runs against a baseline."""

    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    runs = models.ManyToManyField(SimulationRun, related_name="reports")
    baseline = models.ForeignKey(SimulationRun, on_delete=models.PROTECT, related_name="baseline_of")
    metrics = models.JSONField(default=list, blank=True, help_text="Metric names to show; empty = all.")


    def __str__(self) -> str:
        return self.name


class ReEvaluation(TeamOwnedModel):
    """A scheduled re-run of a watched scenario or capacity plan and how its figures moved.

    ``idempotency_key`` (scenario + resolved input hash + engine version) is unique, so a beat started
    twice, or a re-delivered beat message, re-evaluates a scenario once per change.
    """

    class Delivery(models.TextChoices):
        NONE = "none", "No webhook"
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    # exactly one of scenario / capacity_plan: what was re-run
    scenario = models.ForeignKey("planning.Scenario", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="reevaluations")
    capacity_plan = models.ForeignKey("planning.CapacityPlan", null=True, blank=True, on_delete=models.CASCADE,
                                      related_name="reevaluations")
    previous_run = models.ForeignKey(
        SimulationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    new_run = models.OneToOneField(
        SimulationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="reevaluation"
    )
    idempotency_key = models.CharField(max_length=200, unique=True)
    reasons = models.JSONField(default=list, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    summary = models.TextField(blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    delivery_status = models.CharField(max_length=10, choices=Delivery.choices, default=Delivery.NONE)
    delivery_attempts = models.PositiveIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)
    delivery_error = models.TextField(blank=True)


    def __str__(self) -> str:
        what = f"plan {self.capacity_plan_id}" if self.capacity_plan_id else f"scenario {self.scenario_id}"
        return f"Re-evaluation of {what}: {self.summary or 'pending'}"
