"""The portal's list tables (django-tables2), one per list page; ``base`` holds the shared look and columns."""

from portal.tables.catalog import CatalogItemTable
from portal.tables.runs import FabricRunTable, RunTable, SweepTable

__all__ = ["CatalogItemTable", "FabricRunTable", "RunTable", "SweepTable"]
