"""Planning services: every write to catalogs, fleets, workloads and scenarios goes through here.

Keyword-only, typed, transactional; invalid input raises a ``ValidationError`` naming the field, so the
API and the portal forms show the same field errors. Each write is change-logged in its transaction.
One module per concept; import from here or from the module itself:

- :mod:`.catalogs` — versioned vendor catalogs, items, forks, the default loaded from the engine
- :mod:`.imports` — CSV imports of catalog items and fleets
- :mod:`.fleets`, :mod:`.workloads`, :mod:`.scenarios` — CRUD and the builder's one-step save
- :mod:`.documents` — the engine document a scenario stands for, and its validation
- :mod:`.common` — field lists, the 409 ``Conflict``, change-logged updates
"""

from planning.services.catalogs import (
    _require_team_catalog,
    catalog_create,
    catalog_default,
    catalog_delete,
    catalog_edit,
    catalog_fork,
    catalog_item_create,
    catalog_item_delete,
    catalog_item_update,
    catalog_load_default,
    catalog_resolve,
    catalog_update,
    catalog_values,
    catalog_version_delete,
    catalog_version_dependents,
)
from planning.services.common import (
    DEFAULT_CATALOG_NAME,
    DOCUMENT_SECTIONS,
    FLEET_FIELDS,
    ITEM_FIELDS,
    SCENARIO_FIELDS,
    WORKLOAD_FIELDS,
    Conflict,
)
from planning.services.documents import (
    build_document,
    document_validate,
    fleet_cluster,
    gpu_server_item,
    runnable_key,
    runnable_validate,
    set_dotted,
)
from planning.services.fleets import fleet_create, fleet_delete, fleet_update
from planning.services.imports import MAX_CSV_FIELD_CHARS, MAX_CSV_ROWS, catalog_items_import, fleets_import
from planning.services.scenarios import (
    scenario_create,
    scenario_delete,
    scenario_document,
    scenario_resolve,
    scenario_save,
    scenario_sections,
    scenario_update,
)
from planning.services.workloads import workload_create, workload_delete, workload_update

__all__ = [
    "DEFAULT_CATALOG_NAME",
    "DOCUMENT_SECTIONS",
    "FLEET_FIELDS",
    "ITEM_FIELDS",
    "MAX_CSV_FIELD_CHARS",
    "MAX_CSV_ROWS",
    "SCENARIO_FIELDS",
    "WORKLOAD_FIELDS",
    "Conflict",
    "_require_team_catalog",
    "build_document",
    "catalog_create",
    "catalog_default",
    "catalog_delete",
    "catalog_edit",
    "catalog_fork",
    "catalog_item_create",
    "catalog_item_delete",
    "catalog_item_update",
    "catalog_items_import",
    "catalog_load_default",
    "catalog_resolve",
    "catalog_update",
    "catalog_values",
    "catalog_version_delete",
    "catalog_version_dependents",
    "document_validate",
    "fleet_cluster",
    "fleet_create",
    "fleet_delete",
    "fleet_update",
    "fleets_import",
    "gpu_server_item",
    "runnable_key",
    "runnable_validate",
    "scenario_create",
    "scenario_delete",
    "scenario_document",
    "scenario_resolve",
    "scenario_save",
    "scenario_sections",
    "scenario_update",
    "set_dotted",
    "workload_create",
    "workload_delete",
    "workload_update",
]
