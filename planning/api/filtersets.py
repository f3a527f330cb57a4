"""django-filter filtersets for the planning API's list endpoints."""

from __future__ import annotations

from django.db.models import Max, OuterRef, QuerySet, Subquery
from django_filters import rest_framework as filters

from planning.models import CatalogItem, CatalogVersion


class CatalogItemFilter(filters.FilterSet):
    catalog = filters.NumberFilter(field_name="version__catalog_id")
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
