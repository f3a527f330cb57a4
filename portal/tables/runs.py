"""Tables of runs: the runs page (runs and sweeps) and the fabric page's studies."""

from __future__ import annotations

from typing import Any

import django_tables2 as tables
from django.urls import reverse
from django.utils.html import format_html

from portal.tables.base import ACTIONS_HEADER, MetricColumn, PortalTable, cell


def _badge(status: str, display: str) -> str:
    return format_html('<span class="badge badge-{}">{}</span>', status, display)


class RunTable(PortalTable):
    """The runs page: newest first; ``?sort=`` by run, label, kind, status or queued time. The cost of a run that
    does not fit in GPU memory is the red badge, never a figure (and the cost column is not a sort key)."""

    run = tables.Column(accessor="pk", verbose_name="Run", order_by=("id",))
    title = tables.TemplateColumn(template_name="portal/tables/run_title.html", verbose_name="Label",
                                  order_by=("label",))
    kind = tables.Column(verbose_name="Kind")
    status = tables.TemplateColumn(template_name="portal/tables/run_status.html", verbose_name="Status")
    progress = tables.TemplateColumn(template_name="portal/tables/run_progress.html", verbose_name="Progress",
                                     orderable=False, attrs={"th": {"style": "min-width:12rem"}})
    queued_at = tables.DateTimeColumn(format="M j, H:i:s", verbose_name="Queued", attrs=cell(td="small"))
    cost = MetricColumn("tco.run_cost_usd")
    actions = tables.TemplateColumn(template_name="portal/tables/run_actions.html", verbose_name=ACTIONS_HEADER,
                                    orderable=False)

    pager_label = "Run pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "runs-table"}
        row_attrs = {"id": lambda record: f"run-row-{record.pk}"}

    def __init__(self, *args: Any, plan_teams: set[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan_teams = plan_teams

    def render_run(self, record: Any) -> str:
        return format_html('<a href="{}">#{}</a>', reverse("run-detail", args=[record.pk]), record.pk)

    def render_kind(self, record: Any) -> str:
        return format_html('<span class="badge badge-kind">{}</span>', record.kind)  # the short name, as before


class SweepTable(PortalTable):
    """The runs page's sweeps: newest first, with how many of their runs have finished (``done``)."""

    sweep = tables.Column(accessor="pk", verbose_name="Sweep", order_by=("id",))
    scenario = tables.Column(accessor="scenario__name", verbose_name="Scenario")
    axes = tables.TemplateColumn(template_name="portal/tables/sweep_axes.html", verbose_name="Axes",
                                 orderable=False, attrs=cell(td="small"))
    progress = tables.TemplateColumn(template_name="portal/tables/sweep_progress.html", verbose_name="Progress",
                                     order_by=("done",))
    status = tables.Column(verbose_name="Status")
    compare = tables.TemplateColumn(template_name="portal/tables/sweep_compare.html", verbose_name=ACTIONS_HEADER,
                                    orderable=False)

    pager_label = "Sweep pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "sweeps-table"}

    def render_sweep(self, record: Any) -> str:
        return format_html('<a href="{}">{}</a>', reverse("sweep-detail", args=[record.pk]), record)

    def render_status(self, record: Any) -> str:
        return _badge(record.status, record.get_status_display())


class FabricRunTable(PortalTable):
    """The fabric page's studies: newest first, with the P50 efficiency across seeds."""

    study = tables.Column(accessor="pk", verbose_name="Study", order_by=("id",))
    scenario = tables.Column(accessor="scenario__name", verbose_name="Scenario", empty_values=())
    traffic = tables.Column(accessor="params", verbose_name="Traffic", orderable=False)
    status = tables.Column(verbose_name="Status")
    efficiency = MetricColumn("efficiency.p50")

    pager_label = "Study pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "fabric-runs"}

    def render_study(self, record: Any) -> str:
        return format_html('<a href="{}">#{}</a>', reverse("fabric-run", args=[record.pk]), record.pk)

    def render_scenario(self, record: Any) -> str:
        return (record.scenario.name if record.scenario_id else record.label) or "—"

    def render_traffic(self, value: Any) -> str:
        params = value if isinstance(value, dict) else {}
        return f"{params.get('traffic') or 'ring-allreduce'} · {params.get('routing') or 'compare'}"

    def render_status(self, record: Any) -> str:
        return _badge(record.status, record.get_status_display())
