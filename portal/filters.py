"""Filters of the portal's list pages: django-filter FilterSets over querysets, a form over the catalog's items.

A FilterSet only narrows a queryset that already went through the one visibility rule
(``Model.objects.for_request(request)``), so an id filter cannot reach another team's rows: another team's
scenario id and an id that names nothing answer the same (no rows), and the page does not tell them apart.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.http import Http404

from planning.models import CATALOG_KINDS
from simulations.models import ACTIVE_STATUSES, RunStatus, SimulationRun

# the runs page's status tabs: a tab may stand for several statuses ("active" = queued or running)
RUN_STATUS_GROUPS: dict[str, list[str]] = {
    "active": list(ACTIVE_STATUSES), "succeeded": [RunStatus.SUCCEEDED], "failed": [RunStatus.FAILED],
    "cancelled": [RunStatus.CANCELLED],
}


class IdFilter(django_filters.NumberFilter):
    """A database id: a whole number from 1 to the largest 64-bit integer (anything else is a bad value)."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, min_value=1, max_value=2**63 - 1, **kwargs)


class RunFilter(django_filters.FilterSet):
    """``?status=active|succeeded|failed|cancelled`` (anything else: every status) and ``?scenario=<id>``."""

    status = django_filters.ChoiceFilter(choices=[(k, k) for k in RUN_STATUS_GROUPS], method="filter_status")
    scenario = IdFilter(field_name="scenario_id")

    class Meta:
        model = SimulationRun
        fields = ("status", "scenario")

    def filter_status(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(status__in=RUN_STATUS_GROUPS[value])


def filtered(filterset: django_filters.FilterSet, *, not_found: tuple[str, ...] = ()) -> QuerySet:
    """The filtered rows; a bad value of a filter in ``not_found`` (an id that is not a number) answers 404
    naming it. A bad value of any other filter is ignored."""
    for name in not_found:
        if name in filterset.errors:
            raise Http404(f"No such {name}.")
    return filterset.qs


class CatalogItemFilter(forms.Form):
    """The catalog page's kind tab (``?kind=``, default GPUs) and text filter (``?q=`` on key, name and source).
    The items are the engine's dicts (the built-in catalog has no rows), so this is a form, not a FilterSet."""

    kind = forms.ChoiceField(choices=[(k, k) for k in CATALOG_KINDS], required=False)
    q = forms.CharField(required=False, strip=True)

    def kind_value(self) -> str:
        self.is_valid()  # an unknown kind: the GPUs tab
        return self.cleaned_data.get("kind") or "gpu"

    def rows(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kind = self.kind_value()
        q = (self.cleaned_data.get("q") or "").lower()
        return [i for i in items if i["kind"] == kind
                and (not q or q in f"{i['key']} {i['name']} {i.get('source', '')}".lower())]
