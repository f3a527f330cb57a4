"""The base of every API filterset (django-filter).

Choices of related objects follow the one visibility rule: ``?fleet=<another team's id>`` is "not a valid
choice" (400 naming the filter), never a probe of another team's data.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django_filters import rest_framework as filters


def _visible(queryset: Any, request: Any) -> Any:
    return queryset.for_request(request)


class ScopedFilterSet(filters.FilterSet):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for f in self.filters.values():
            queryset = getattr(f, "queryset", None)
            if queryset is not None and not callable(queryset) and hasattr(queryset, "for_request"):
                f.queryset = partial(_visible, queryset)
