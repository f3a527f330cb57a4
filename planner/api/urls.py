"""The /api/v1/ router. Domain apps register their viewsets here."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from accounts.api.views import ApiTokenViewSet, MeView, TeamViewSet
from planning.api.views import (
    CatalogItemViewSet,
    CatalogVersionViewSet,
    CatalogViewSet,
    FleetViewSet,
    ObjectChangeViewSet,
    WorkloadViewSet,
)
from simulations.api.accuracy import AccuracyView
from simulations.api.calibration import CalibrationProfileViewSet, CalibrationUploadViewSet
from simulations.api.capacity_plans import CapacityPlanViewSet
from simulations.api.views import (
    PreviewView,
    ReEvaluationViewSet,
    ReportViewSet,
    RunViewSet,
    ScenarioRunViewSet,
    SweepViewSet,
)

router = DefaultRouter()
router.register("teams", TeamViewSet, basename="team")
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("catalogs", CatalogViewSet, basename="catalog")
router.register("catalog-versions", CatalogVersionViewSet, basename="catalogversion")
router.register("catalog-items", CatalogItemViewSet, basename="catalogitem")
router.register("fleets", FleetViewSet, basename="fleet")
router.register("workloads", WorkloadViewSet, basename="workload")
router.register("scenarios", ScenarioRunViewSet, basename="scenario")
router.register("runs", RunViewSet, basename="run")
router.register("sweeps", SweepViewSet, basename="sweep")
router.register("reports", ReportViewSet, basename="report")
router.register("reevaluations", ReEvaluationViewSet, basename="reevaluation")
router.register("changes", ObjectChangeViewSet, basename="change")
router.register("calibration-files", CalibrationUploadViewSet, basename="calibrationfile")
router.register("calibration-profiles", CalibrationProfileViewSet, basename="calibrationprofile")
router.register("capacity-plans", CapacityPlanViewSet, basename="capacityplan")

urlpatterns = [
    # The compare report without the trailing slash too: /api/v1/reports/compare?runs=1,2&baseline=1
    path("reports/compare", ReportViewSet.as_view({"get": "compare"}, schema=None), name="report-compare-noslash"),
    path("preview/", PreviewView.as_view(), name="preview"),
    path("me/", MeView.as_view(), name="me"),
    path("accuracy/", AccuracyView.as_view(), name="accuracy"),
    *router.urls,
]
