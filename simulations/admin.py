from django.contrib import admin

from simulations.models import ReEvaluation, Report, SimulationRun, Sweep


@admin.register(SimulationRun)
class SimulationRunAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "kind", "status", "progress", "label", "attempts", "queued_at", "finished_at")
    list_filter = ("status", "kind", "trigger", "team")
    search_fields = ("label", "input_hash")
    readonly_fields = ("input_snapshot", "result", "input_hash", "engine_version", "claim_token")


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
