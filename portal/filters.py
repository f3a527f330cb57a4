"""Filters of the portal's list pages: django-filter FilterSets over querysets, a form over the catalog's items.

Related-object choices are the caller's visible rows (``Model.objects.for_request(request)``, the one
visibility rule): another team's id is not a valid choice, and the page answers 404 naming it, as it would
for an object it cannot see.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.http import Http404, HttpRequest

from planning.models import CATALOG_KINDS, Scenario
from simulations.models import ACTIVE_STATUSES, RunStatus, SimulationRun

# the runs page's status tabs: a tab may stand for several statuses ("active" = queued or running)
RUN_STATUS_GROUPS: dict[str, list[str]] = {
    "active": list(ACTIVE_STATUSES), "succeeded": [RunStatus.SUCCEEDED], "failed": [RunStatus.FAILED],
    "cancelled": [RunStatus.CANCELLED],
}


def _visible_scenarios(request: HttpRequest) -> QuerySet[Scenario]:
    return Scenario.objects.for_request(request)


class RunFilter(django_filters.FilterSet):
    """``?status=active|succeeded|failed|cancelled`` (anything else: every status) and ``?scenario=<id>``."""

    status = django_filters.ChoiceFilter(choices=[(k, k) for k in RUN_STATUS_GROUPS], method="filter_status")
    scenario = django_filters.ModelChoiceFilter(queryset=_visible_scenarios)

    class Meta:
        model = SimulationRun
        fields = ("status", "scenario")

    def filter_status(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(status__in=RUN_STATUS_GROUPS[value])


def filtered(filterset: django_filters.FilterSet, *, not_found: tuple[str, ...] = ()) -> QuerySet:
    """The filtered rows; a bad value of a filter in ``not_found`` (an object the caller cannot see, or no
    object at all) answers 404 naming it. A bad value of any other filter is ignored."""
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
