"""django-filter filtersets for the simulations API's list endpoints (related-object choices scoped by team)."""

from __future__ import annotations

from core.api.filtersets import ScopedFilterSet
from planning.models import CalibrationProfile, CalibrationUpload, CapacityPlan
from simulations.models import ReEvaluation, Report, SimulationRun, Sweep


class RunFilterSet(ScopedFilterSet):
    class Meta:
        model = SimulationRun
        fields = ("status", "kind", "scenario", "sweep", "trigger", "engine_version", "input_hash")


class SweepFilterSet(ScopedFilterSet):
    class Meta:
        model = Sweep
        fields = ("status", "scenario", "kind")


class ReportFilterSet(ScopedFilterSet):
    class Meta:
        model = Report
        fields = ("name",)


class ReEvaluationFilterSet(ScopedFilterSet):
    class Meta:
        model = ReEvaluation
        fields = ("scenario", "delivery_status")


class CapacityPlanFilterSet(ScopedFilterSet):
    class Meta:
        model = CapacityPlan
        fields = ("name",)


class CalibrationUploadFilterSet(ScopedFilterSet):
    class Meta:
        model = CalibrationUpload
        fields = ("fleet", "kind")


class CalibrationProfileFilterSet(ScopedFilterSet):
    class Meta:
        model = CalibrationProfile
        fields = ("fleet",)
