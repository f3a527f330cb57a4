"""The portal's list tables (django-tables2), one per list page; ``base`` holds the shared look and columns."""

from portal.tables.catalog import CatalogItemTable
from portal.tables.planning import CapacityPlanTable, FleetTable, ScenarioTable
from portal.tables.reports import ReEvaluationTable, ReportTable, TokenTable
from portal.tables.runs import FabricRunTable, RunTable, SweepTable

__all__ = [
    "CapacityPlanTable", "CatalogItemTable", "FabricRunTable", "FleetTable", "ReEvaluationTable", "ReportTable",
    "RunTable", "ScenarioTable", "SweepTable", "TokenTable",
]
