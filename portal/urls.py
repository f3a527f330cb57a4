from django.urls import path

from portal import views
from portal.views import calibration, capacity, run_page, tokens
from portal.views import fabric as fabric_views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("catalog/", views.catalog, name="catalog"),
    path("catalog/<int:pk>/fork/", views.catalog_fork, name="catalog-fork"),
    path("fleets/", views.fleets, name="fleets"),
    path("fleets/new/", views.fleet_edit, name="fleet-new"),
    path("fleets/<int:pk>/edit/", views.fleet_edit, name="fleet-edit"),
    path("fleets/<int:pk>/calibration/", calibration.fleet_calibration, name="fleet-calibration"),
    path("scenarios/<int:pk>/calibration/", calibration.scenario_calibration, name="scenario-calibration"),
    path("scenarios/", views.scenarios, name="scenarios"),
    path("scenarios/new/", views.scenario_edit, name="scenario-new"),
    path("scenarios/preview/", views.scenario_preview, name="scenario-preview"),
    path("scenarios/<int:pk>/", views.scenario_detail, name="scenario-detail"),
    path("scenarios/<int:pk>/edit/", views.scenario_edit, name="scenario-edit"),
    path("scenarios/<int:pk>/run/", views.scenario_run, name="scenario-run"),
    path("scenarios/<int:pk>/sweep/", views.scenario_sweep, name="scenario-sweep"),
    path("runs/", views.runs, name="runs"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("sweeps/<int:pk>/", views.sweep_detail, name="sweep-detail"),
    path("compare/", views.compare, name="compare"),
    path("compare/export/", views.compare_export, name="compare-export"),
    path("reports/", views.reports, name="reports"),
    path("reports/new/", views.report_new, name="report-new"),
    path("reports/<int:pk>/", views.report_detail, name="report-detail"),
    path("reevaluations/", views.reevaluations, name="reevaluations"),
    path("runs/<int:pk>/export/", run_page.run_export, name="run-export"),
    path("fabric/", fabric_views.fabric, name="fabric"),
    path("fabric/runs/<int:pk>/", fabric_views.fabric_run, name="fabric-run"),
    path("fabric/runs/<int:pk>/pin/", fabric_views.fabric_run_pin, name="fabric-run-pin"),
    path("capacity/", capacity.capacity_plans, name="capacity-plans"),
    path("capacity/<int:pk>/run/", capacity.capacity_plan_run, name="capacity-plan-run"),
    path("capacity/runs/<int:pk>/", capacity.capacity_run, name="capacity-run"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="token-revoke"),
]
