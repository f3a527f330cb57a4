from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from simulations.models import ReEvaluation, Report, RunEvent, SimulationRun, Sweep


class RunEventInline(admin.TabularInline):
    """A run's execution history on its admin page: append-only, written by the run protocol, never by hand."""

    model = RunEvent
    fields = ("at", "kind", "attempt", "worker", "message")
    readonly_fields = fields
    ordering = ("at", "id")
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SimulationRun)
class SimulationRunAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "kind", "status", "progress", "label", "attempts", "queued_at", "finished_at")
    list_filter = ("status", "kind", "trigger", "team")
    search_fields = ("label", "input_hash")
    readonly_fields = ("input_snapshot", "result", "input_hash", "engine_version", "claim_token")
    inlines = (RunEventInline,)


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    """Every run's events, newest first: recoveries across runs (lapsed leases, re-sent messages, lost claims)."""

    list_display = ("at", "run", "kind", "attempt", "worker", "message")
    list_filter = ("kind",)
    search_fields = ("=run__id", "worker", "message")
    list_select_related = ("run",)
    ordering = ("-at", "-id")
    date_hierarchy = "at"
    readonly_fields = ("run", "at", "kind", "attempt", "worker", "message")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "name", "status", "total_runs", "created_at", "finished_at")
    list_filter = ("status",)


@admin.register(Report)
class ReportAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "baseline", "created_at")


@admin.register(ReEvaluation)
class ReEvaluationAdmin(admin.ModelAdmin):
    list_display = ("id", "scenario", "summary", "delivery_status", "created_at", "completed_at")
    list_filter = ("delivery_status",)
