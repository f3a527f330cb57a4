"""Tables of planning objects: scenarios, fleets and capacity plans."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_tables2 as tables
from django.utils.html import format_html

from engine.schema.enums import Fabric
from portal.charts import cluster_summary
from portal.tables.base import (
    ACTIONS_HEADER,
    NUM,
    ROW_HEADER,
    FormatColumn,
    MetricColumn,
    PortalTable,
    RunLinkColumn,
    cell,
)
from simulations.models import RunKind, RunStatus
from simulations.services.capacity_plans import plan_runs


def latest_finished(kind: str) -> Any:
    """The row's newest succeeded run of ``kind`` (from the prefetched ``recent_runs``, newest first): a column
    of that kind's figure keeps it when a run of another kind (a fabric study) is the scenario's last."""

    def pick(record: Any) -> Any:
        return next((r for r in getattr(record, "recent_runs", ()) or ()
                     if r.kind == kind and r.status == RunStatus.SUCCEEDED), None)

    return pick


class ScenarioTable(PortalTable):
    """Most recently updated first. ``recent_runs`` (prefetched, newest first): the last run (any kind), and the
    $ per run of the latest finished TCO run, or the red "does not fit" badge when that run does not fit in GPU
    memory (a fabric study or a predict run after it does not blank the figure)."""

    name = tables.TemplateColumn(template_name="portal/tables/scenario_name.html", verbose_name="Scenario")
    workload = tables.Column(accessor="workload__name", verbose_name="Workload")
    cluster = tables.Column(accessor="pk", verbose_name="Cluster", orderable=False, attrs=cell(td="small"))
    team = tables.Column(accessor="team__name", verbose_name="Team")
    last_run = RunLinkColumn(run="recent_runs.0", verbose_name="Last run")
    cost = MetricColumn("tco.run_cost_usd", run=latest_finished(RunKind.TCO))
    updated_at = tables.DateTimeColumn(format="M j, H:i", verbose_name="Updated", attrs=cell(td="small"))
    actions = tables.TemplateColumn(template_name="portal/tables/scenario_actions.html",
                                    verbose_name=ACTIONS_HEADER, orderable=False)

    pager_label = "Scenario pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "scenarios-table"}

    def __init__(self, *args: Any, server_gpus: Mapping[str, Any], plan_teams: set[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server_gpus, self.plan_teams = server_gpus, plan_teams

    def render_cluster(self, record: Any) -> str:
        return cluster_summary(record, self.server_gpus) or "—"


class FleetTable(PortalTable):
    name = tables.Column(verbose_name="Name")
    team = tables.Column(accessor="team__name", verbose_name="Team")
    site = tables.Column(verbose_name="Site")
    servers = tables.Column(accessor="server_count", verbose_name="Servers")
    gpus = FormatColumn("number", accessor="gpus", verbose_name="GPUs", orderable=False)
    nics = tables.Column(accessor="nics_per_node", verbose_name="NICs")
    fabric = tables.Column(verbose_name="Fabric")
    topology = tables.Column(verbose_name="Topology")
    oversubscription = tables.Column(verbose_name="Oversub.", attrs=NUM)
    in_service_date = tables.DateColumn(format="M j, Y", verbose_name="In service")
    n_scenarios = tables.Column(verbose_name="Scenarios", attrs=NUM)
    actions = tables.TemplateColumn(template_name="portal/tables/fleet_actions.html", verbose_name=ACTIONS_HEADER,
                                    orderable=False)

    pager_label = "Fleet pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "fleets-table"}

    def __init__(self, *args: Any, plan_teams: set[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan_teams = plan_teams

    def render_name(self, value: str) -> str:
        return format_html("<strong>{}</strong>", value)

    def render_servers(self, record: Any) -> str:
        return format_html('{} × <span class="mono">{}</span>', record.server_count, record.server_model)

    def render_nics(self, record: Any) -> str:
        return f"{record.nics_per_node} × {record.nic_gbps}G"

    def render_fabric(self, value: str) -> str:
        return Fabric.label(value)

    def render_oversubscription(self, value: Any) -> str:
        return f"{value}:1"


class CapacityPlanTable(PortalTable):
    """Each plan with the size of its document and its latest run (the page's rows only are looked up)."""

    name = tables.TemplateColumn(template_name="portal/tables/plan_name.html", verbose_name="Plan",
                                 attrs=ROW_HEADER)
    team = tables.Column(accessor="team__name", verbose_name="Team")
    clusters = tables.Column(accessor="document", verbose_name="Clusters", orderable=False, attrs=NUM)
    jobs = tables.Column(accessor="document", verbose_name="Named jobs", orderable=False, attrs=NUM)
    candidates = tables.Column(accessor="document", verbose_name="Purchase options", orderable=False, attrs=NUM)
    latest = RunLinkColumn(run=lambda plan: plan_runs(plan).first(), url="capacity-run", verbose_name="Latest run")
    run = tables.TemplateColumn(template_name="portal/tables/plan_run.html", verbose_name=ACTIONS_HEADER,
                                orderable=False)

    pager_label = "Plan pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "capacity-plans"}

    def __init__(self, *args: Any, plan_teams: set[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan_teams = plan_teams

    @staticmethod
    def _count(document: Any, key: str) -> int:
        return len((document or {}).get(key) or []) if isinstance(document, dict) else 0

    def render_clusters(self, value: Any) -> int:
        return self._count(value, "clusters")

    def render_jobs(self, value: Any) -> int:
        return self._count(value, "jobs")

    def render_candidates(self, value: Any) -> int:
        return self._count(value, "candidates")
