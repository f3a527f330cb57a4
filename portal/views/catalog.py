"""Catalog pages: items of a version, version history, forking."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_tables2 import RequestConfig

from accounts.roles import Capability
from accounts.scoping import visible_team_ids
from core.errors import ValidationError
from planning import services
from planning.models import Catalog, CatalogVersion, ObjectChange
from planning.selectors import catalog_items_for_display
from portal.filters import CatalogItemFilter
from portal.tables import CatalogItemTable
from portal.views.common import _can, _error_dict, _team_for_create

logger = logging.getLogger(__name__)


CATALOG_KIND_LABELS = [
    ("gpu", "GPUs"), ("server", "Servers"), ("nic", "NICs"), ("switch", "Switches"),
    ("transceiver", "Optics"), ("cable", "Cables"), ("facility", "Facility"), ("reliability", "Reliability"),
]
ITEMS_PER_PAGE = 50


@login_required
@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    catalogs = list(Catalog.objects.for_request(request).order_by("team_id", "name"))
    selected = None
    if request.GET.get("catalog"):
        selected = next((c for c in catalogs if str(c.pk) == request.GET["catalog"]), None)
        if selected is None:
            raise Http404("No such catalog.")
    elif catalogs:
        selected = next((c for c in catalogs if c.team_id is None), catalogs[0])
    versions = list(selected.versions.select_related("created_by").order_by("-number")) if selected else []
    version = versions[0] if versions else None
    if request.GET.get("version") and versions:
        version = next((v for v in versions if str(v.number) == request.GET["version"]), None)
        if version is None:
            raise Http404("No such version.")
    items = catalog_items_for_display(version)
    counts: dict[str, int] = {}
    for item in items:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    item_filter = CatalogItemFilter(request.GET)
    kind = item_filter.kind_value()
    table = CatalogItemTable(item_filter.rows(items), kind=kind)
    RequestConfig(request, paginate={"per_page": ITEMS_PER_PAGE}).configure(table)
    history = _version_history(selected, versions) if selected else []
    return render(request, "portal/catalog.html", {
        "catalogs": catalogs, "selected": selected, "versions": versions, "version": version,
        "kinds": [(k, label, counts.get(k, 0)) for k, label in CATALOG_KIND_LABELS if counts.get(k)],
        "kind": kind, "q": request.GET.get("q", ""), "table": table,
        "history": history, "builtin": version is None,
        "can_edit": selected is not None and selected.team_id is not None
        and _can(request, selected.team_id, Capability.CATALOG),
        "can_fork": bool(visible_team_ids(request, Capability.CATALOG)),
    })


def _version_history(selected: Catalog, versions: list[CatalogVersion]) -> list[dict[str, Any]]:
    """Each version with the item changes the change log recorded for it (newest first)."""
    changes = ObjectChange.objects.filter(object_type="catalog", object_id=selected.pk).order_by("-time")
    by_version: dict[int, ObjectChange] = {}
    for ch in changes:
        after = ch.postchange or {}
        number = after.get("version") if isinstance(after, dict) else None
        diff = ch.diff or {}
        if number is None and isinstance(diff.get("version"), dict):
            number = diff["version"].get("after")
        if isinstance(number, int) and number not in by_version:
            by_version[number] = ch
    out = []
    for v in versions[:20]:
        found = by_version.get(v.number)
        items = []
        if found is not None:
            for path, change in sorted((found.diff or {}).items()):
                if not path.startswith("items."):
                    continue
                before, after = (change or {}).get("before"), (change or {}).get("after")
                items.append(_item_change(path[len("items."):], before, after))
        initial = v == versions[-1] and items and all(c["action"] == "added" for c in items)
        if initial:  # the first version adds everything: a count says more than a list
            out.append({"version": v, "changes": [], "more": 0, "initial_count": len(items)})
            continue
        out.append({"version": v, "changes": items[:40], "more": max(0, len(items) - 40)})
    return out


def _item_change(key: str, before: Any, after: Any) -> dict[str, Any]:
    if before is None:
        return {"key": key, "action": "added", "fields": []}
    if after is None:
        return {"key": key, "action": "removed", "fields": []}
    fields = []
    for f in ("name", "unit_price_usd", "power_w", "source"):
        if before.get(f) != after.get(f):
            fields.append({"field": f, "before": before.get(f), "after": after.get(f)})
    b_specs, a_specs = before.get("specs") or {}, after.get("specs") or {}
    for f in sorted(set(b_specs) | set(a_specs)):
        if b_specs.get(f) != a_specs.get(f):
            fields.append({"field": f"specs.{f}", "before": b_specs.get(f), "after": a_specs.get(f)})
    return {"key": key, "action": "changed", "fields": fields}


@login_required
@require_POST
def catalog_fork(request: HttpRequest, pk: int) -> HttpResponse:
    source = get_object_or_404(Catalog.objects.for_request(request), pk=pk)
    team = _team_for_create(request, Capability.CATALOG)
    try:
        fork = services.catalog_fork(catalog=source, team=team, user=request.user)
    except (ValidationError, DjangoValidationError) as exc:
        messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in _error_dict(exc).items()))
        return HttpResponseRedirect(reverse("catalog") + f"?catalog={source.pk}")
    messages.success(request, f"Forked {source.name} into {fork.name}. Prices you edit there apply to your team only.")
    return HttpResponseRedirect(reverse("catalog") + f"?catalog={fork.pk}")
