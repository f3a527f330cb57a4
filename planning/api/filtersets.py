"""django-filter filtersets for the planning API's list endpoints (related-object choices scoped by team)."""

from __future__ import annotations

from django.db.models import Max, OuterRef, QuerySet, Subquery
from django_filters import rest_framework as filters

from core.api.filtersets import ScopedFilterSet
from planning.models import Catalog, CatalogItem, CatalogVersion, Fleet, ObjectChange, Scenario, Workload


class CatalogItemFilter(ScopedFilterSet):
    # a choice of the catalogs the caller sees (an id no catalog has, or a number no column holds, is a 400)
    catalog = filters.ModelChoiceFilter(field_name="version__catalog", queryset=Catalog.objects.all())
    latest = filters.BooleanFilter(method="filter_latest", label="Only items of each catalog's latest version")

    class Meta:
        model = CatalogItem
        fields = ("version", "kind", "key", "catalog")

    def filter_latest(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        if not value:
            return queryset
        latest = (CatalogVersion.objects.filter(catalog_id=OuterRef("version__catalog_id"))
                  .values("catalog_id").annotate(n=Max("number")).values("n"))
        return queryset.filter(version__number=Subquery(latest))


class CatalogFilterSet(ScopedFilterSet):
    class Meta:
        model = Catalog
        fields = ("name",)


class CatalogVersionFilterSet(ScopedFilterSet):
    class Meta:
        model = CatalogVersion
        fields = ("catalog", "number")


class FleetFilterSet(ScopedFilterSet):
    class Meta:
        model = Fleet
        fields = ("site", "fabric", "topology", "server_model", "name")


class WorkloadFilterSet(ScopedFilterSet):
    class Meta:
        model = Workload
        fields = ("name",)


class ScenarioFilterSet(ScopedFilterSet):
    class Meta:
        model = Scenario
        fields = ("watched", "fleet", "workload", "catalog", "name")


class ObjectChangeFilterSet(ScopedFilterSet):
    class Meta:
        model = ObjectChange
        fields = ("object_type", "object_id", "action", "user_name", "request_id")
