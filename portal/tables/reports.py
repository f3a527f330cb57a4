"""Tables of results people keep or watch: saved reports, re-evaluations, and a user's API tokens."""

from __future__ import annotations

from typing import Any

import django_tables2 as tables

from portal.charts import reevaluation_changes
from portal.panels import fit_problem
from portal.tables.base import ACTIONS_HEADER, NUM, PortalTable, cell


class ReportTable(PortalTable):
    """Saved reports, most recently updated first; ``n_runs`` is annotated (a sort key)."""

    name = tables.TemplateColumn(template_name="portal/tables/report_name.html", verbose_name="Report")
    n_runs = tables.Column(verbose_name="Runs", attrs=NUM)
    baseline = tables.TemplateColumn(template_name="portal/tables/report_baseline.html", verbose_name="Baseline",
                                     order_by=("baseline_id",))
    team = tables.Column(accessor="team__name", verbose_name="Team")
    created_by = tables.Column(verbose_name="Saved by", attrs=cell(td="small"), order_by=("created_by__username",))
    updated_at = tables.DateTimeColumn(format="M j, Y H:i", verbose_name="Updated", attrs=cell(td="small"))

    pager_label = "Report pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "reports-table"}

    def render_created_by(self, value: Any) -> str:
        return getattr(value, "display_name", "") or value.get_username()


def _reevaluation_context(record: Any) -> dict[str, Any]:
    """The headline moves (metric registry labels and formats) and the new run's does-not-fit warning."""
    return {"change_rows": reevaluation_changes(record.changes),
            "new_fit": fit_problem(record.new_run) if record.new_run is not None else None}


class ReEvaluationTable(PortalTable):
    """Re-evaluations of watched scenarios and plans, newest first: what was re-run, when, and how its headline
    figures moved (a new run that does not fit in GPU memory carries the red warning)."""

    subject = tables.TemplateColumn(template_name="portal/tables/reeval_subject.html", verbose_name="Watched",
                                    orderable=False)
    created_at = tables.TemplateColumn(template_name="portal/tables/reeval_when.html", verbose_name="When",
                                       attrs=cell(td="small"))
    changes = tables.TemplateColumn(template_name="portal/tables/reeval_changes.html", verbose_name="What changed",
                                    orderable=False, extra_context=_reevaluation_context)

    pager_label = "Re-evaluation pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "reevaluations-table"}


class TokenTable(PortalTable):
    """The signed-in user's API tokens, newest first."""

    name = tables.Column(verbose_name="Name")
    team = tables.Column(accessor="team__name", verbose_name="Team")
    prefix = tables.Column(verbose_name="Prefix", attrs=cell(td="mono"))
    created_at = tables.DateTimeColumn(format="M j, Y H:i", verbose_name="Created")
    last_used_at = tables.DateTimeColumn(format="M j, Y H:i", verbose_name="Last used", default="never",
                                         attrs=cell(td="token-last-used"))
    expires_at = tables.DateTimeColumn(format="M j, Y", verbose_name="Expires", default="never")
    state = tables.TemplateColumn(template_name="portal/tables/token_state.html", verbose_name="Status",
                                  orderable=False)
    actions = tables.TemplateColumn(template_name="portal/tables/token_revoke.html", verbose_name=ACTIONS_HEADER,
                                    orderable=False)

    pager_label = "Token pages"

    class Meta(PortalTable.Meta):
        attrs = {**PortalTable.Meta.attrs, "id": "token-table"}
        row_attrs = {"data-token": lambda record: record.pk}

    def __init__(self, *args: Any, now: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = now

    def render_prefix(self, value: str) -> str:
        return f"{value}…"
