"""Portal pages, one module per domain. Thin: read through team-scoped querysets/selectors, write through
the domain services, render templates. Permissions follow the API: reads need ``read`` in the object's team,
runs and edits need ``plan`` (403 otherwise), exports need ``export``; another team's object answers 404.
"""

from portal.views.catalog import catalog, catalog_fork
from portal.views.dashboard import dashboard
from portal.views.fleets import fleet_edit, fleets
from portal.views.reevaluations import reevaluations
from portal.views.reports import compare, compare_export, report_detail, report_new, reports
from portal.views.runs import run_cancel, run_detail, runs, sweep_detail
from portal.views.scenarios import (
    scenario_detail,
    scenario_edit,
    scenario_preview,
    scenario_run,
    scenario_sweep,
    scenarios,
)

__all__ = [
    "catalog",
    "catalog_fork",
    "compare",
    "compare_export",
    "dashboard",
    "fleet_edit",
    "fleets",
    "reevaluations",
    "report_detail",
    "report_new",
    "reports",
    "run_cancel",
    "run_detail",
    "runs",
    "scenario_detail",
    "scenario_edit",
    "scenario_preview",
    "scenario_run",
    "scenario_sweep",
    "scenarios",
    "sweep_detail",
]
