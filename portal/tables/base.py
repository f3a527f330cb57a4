"""The base of every portal list table (django-tables2): the portal's look, ``?sort=`` ordering, bounded pages.

Tables render with ``{% render_table table %}`` through ``portal/_table.html`` (the portal's ``table.data``
classes, ``<th scope="col">`` with ``aria-sort``, a pager that keeps the other query parameters). Numbers are
printed by the portal's own filters in small cell templates (``portal/tables/*.html``), never here, so this
package imports no template tags; metric columns take their label and format from the one metric registry
(``simulations.metrics``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import django_tables2 as tables
from django.utils.safestring import mark_safe
from django_tables2.data import TableListData
from django_tables2.utils import Accessor

from portal.panels import fit_problem
from simulations import metrics as registry

# header classes the portal's CSS knows: ``th.sorted`` (▲) and ``th.sorted.desc`` (▼)
ORDERING = {"_ordering": {"orderable": "sortable", "ascending": "sorted", "descending": "sorted desc"}}
MAX_PER_PAGE = 200  # ?per_page= above this is served as this: a page is never the whole table


def cell(th: str = "", td: str = "", **td_attrs: Any) -> dict[str, dict[str, Any]]:
    """Column ``attrs``: header and cell classes (``num`` right-aligns), keeping the ordering classes."""
    head: dict[str, Any] = {**ORDERING, **({"class": th} if th else {})}
    body: dict[str, Any] = {**({"class": td} if td else {}), **td_attrs}
    return {"th": head, "td": body}


NUM = cell("num", "num")
ROW_HEADER = cell(scope="row")  # the cell is rendered as <th scope="row"> (portal/_table.html)
ACTIONS_HEADER = mark_safe('<span class="visually-hidden">Actions</span>')  # a constant


class PortalTable(tables.Table):
    """A portal list: ``?sort=<column>`` (``-`` descending, unknown names ignored), ``?page=<n>`` (past the
    end: the last page; not a number: the first)."""

    pager_label = "Pages"  # the pager's landmark name; unique per page when a page has two tables

    class Meta:
        template_name = "portal/_table.html"
        attrs = {"class": "data", "th": ORDERING}
        order_by_field = "sort"
        default = "—"

    def paginate(self, *args: Any, per_page: int | None = None, **kwargs: Any) -> None:
        if per_page is not None:
            per_page = min(max(int(per_page), 1), MAX_PER_PAGE)
        super().paginate(*args, per_page=per_page, **kwargs)


def _sort_value(value: Any) -> tuple[int, Any]:
    """Numbers before text (never compared with each other); text case-insensitively."""
    return (1, value.lower()) if isinstance(value, str) else (0, value)


class MissingLastListData(TableListData):
    """Rows that are dicts (the catalog's items), ordered like a spreadsheet: text case-insensitively and rows
    without the value last in either direction (django-tables2 would put them first when ascending)."""

    def order_by(self, aliases: Iterable[str]) -> None:
        rows: list[Any] = list(self)
        for alias in reversed(list(aliases)):  # least significant key first; each sort is stable
            accessor = self.table.columns[alias.lstrip("-")].accessor
            pairs = [(accessor.resolve(row, quiet=True), row) for row in rows]
            present = sorted(((v, r) for v, r in pairs if v is not None), key=lambda vr: _sort_value(vr[0]),
                             reverse=alias.startswith("-"))
            rows = [r for _, r in present] + [r for v, r in pairs if v is None]
        self.data = rows


RunOf = str | Callable[[Any], Any] | None


def run_of(record: Any, where: RunOf) -> Any:
    """The run a row shows: the row itself (``None``), an accessor (``recent_runs.0``) or a function of the row."""
    if where is None:
        return record
    if callable(where):
        return where(record)
    return Accessor(where).resolve(record, quiet=True)


class RunLinkColumn(tables.TemplateColumn):
    """A link to a run (``#12``) with its status badge, or ``never`` when there is none."""

    def __init__(self, *, run: RunOf, url: str = "run-detail", never: str = "never run", **kwargs: Any):
        self.run, self.url, self.never = run, url, never
        kwargs.setdefault("orderable", False)
        super().__init__(template_name="portal/tables/run_link.html", **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "run": run_of(kwargs["record"], self.run),
                "run_url": self.url, "never": self.never}


class MetricColumn(tables.TemplateColumn):
    """A figure of a run's stored result, by its path in the metric registry (label, format). A run that does
    not fit in GPU memory shows the red "does not fit" badge instead of a figure, never a number to compare.

    ``run``: where the run is on the row (see :func:`run_of`)."""

    def __init__(self, path: str, *, run: RunOf = None, verbose_name: str | None = None, **kwargs: Any):
        spec = registry.get(path)
        self.path, self.run = path, run
        self.format = spec.format if spec is not None else "num"
        kwargs.setdefault("orderable", False)
        kwargs.setdefault("attrs", NUM)
        super().__init__(template_name="portal/tables/metric.html", empty_values=(),
                         verbose_name=verbose_name or (spec.label if spec is not None else path), **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        record = kwargs["record"]
        run = run_of(record, self.run)
        result = getattr(run, "result", None)
        context.update(run=run, fit=fit_problem(run) if run is not None else None,
                       value=registry.value(result if isinstance(result, dict) else None, self.path),
                       format=self.format)
        return context


class FormatColumn(tables.TemplateColumn):
    """A number printed by one of the portal's filters (``usd_full``, ``watts``, ``number``, ``qty``) or by a
    metric format kind (``usd``, ``pct``, ``days``…)."""

    def __init__(self, fmt: str, **kwargs: Any):
        self.fmt = fmt
        kwargs.setdefault("attrs", NUM)
        super().__init__(template_name="portal/tables/number.html", **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "fmt": self.fmt}
