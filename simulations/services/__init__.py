"""Simulation services, one module per concept. Import from here or from the module itself.

- :mod:`.runs` — create and submit runs (snapshot, input hash, reuse of identical results)
- :mod:`.execution` — claim, execute, finish, release, reap, cancel (the run protocol)
- :mod:`.leases` — a running execution's lease and its heartbeat thread; run events
- :mod:`.calibration` — calibration import and fit jobs (issue #23)
- :mod:`.sweeps` — expand axes, fan out, aggregate
- :mod:`.preview` — the synchronous estimate behind live forms
- :mod:`.reevaluation` — watched scenarios, diffs between runs
- :mod:`.webhooks` — signed delivery of re-evaluation diffs
- :mod:`.reports` — saved comparison reports
- :mod:`.dispatch` — sending Celery tasks by name (services never import ``simulations.tasks``)
- :mod:`.hashing`, :mod:`.params` — canonical JSON / input hash, run options
"""

from simulations.models import TERMINAL_STATUSES
from simulations.services.dispatch import enqueue_runs
from simulations.services.execution import (
    MAX_ATTEMPTS,
    RunAborted,
    TransientError,
    compute,
    run_cancel,
    run_claim,
    run_execute,
    run_reap,
)
from simulations.services.hashing import canonical_json, engine_version, input_hash, jsonable
from simulations.services.params import clean_params
from simulations.services.preview import PREVIEW_FIELDS, preview
from simulations.services.reevaluation import (
    reevaluate_watched,
    reevaluation_complete,
    run_diff,
    scenario_needs_reevaluation,
)
from simulations.services.reports import report_create, report_update
from simulations.services.runs import run_create, run_submit
from simulations.services.sweeps import (
    KEY_METRICS,
    SWEEP_AXIS_SECTIONS,
    sweep_cancel,
    sweep_expand,
    sweep_refresh,
    sweep_submit,
)
from simulations.services.webhooks import (
    WebhookError,
    webhook_deliver,
    webhook_give_up,
    webhook_payload,
    webhook_signature,
)

__all__ = [
    "KEY_METRICS",
    "MAX_ATTEMPTS",
    "PREVIEW_FIELDS",
    "SWEEP_AXIS_SECTIONS",
    "TERMINAL_STATUSES",
    "RunAborted",
    "TransientError",
    "WebhookError",
    "canonical_json",
    "clean_params",
    "compute",
    "engine_version",
    "enqueue_runs",
    "input_hash",
    "jsonable",
    "preview",
    "reevaluate_watched",
    "reevaluation_complete",
    "report_create",
    "report_update",
    "run_cancel",
    "run_claim",
    "run_create",
    "run_diff",
    "run_execute",
    "run_reap",
    "run_submit",
    "scenario_needs_reevaluation",
    "sweep_cancel",
    "sweep_expand",
    "sweep_refresh",
    "sweep_submit",
    "webhook_deliver",
    "webhook_give_up",
    "webhook_payload",
    "webhook_signature",
]
