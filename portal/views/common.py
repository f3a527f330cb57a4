"""Helpers every portal page shares: capability checks, htmx, error dicts, the catalog and runs in scope."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest

from accounts.roles import Capability
from accounts.scoping import active_team, has_capability
from core.errors import DomainError
from planning.models import CatalogVersion
from planning.services import catalog_resolve, catalog_values
from simulations.models import SimulationRun

logger = logging.getLogger(__name__)


def _require(request: HttpRequest, team_id: int | None, capability: str) -> None:
    if not has_capability(request, team_id, capability):
        raise PermissionDenied(f"Your role in this team does not allow '{capability}'.")


def _htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


def _can(request: HttpRequest, team_id: int | None, capability: str) -> bool:
    return has_capability(request, team_id, capability)


def _team_for_create(request: HttpRequest, capability: str = Capability.PLAN) -> Any:
    team = active_team(request, capability)
    if team is None:
        raise PermissionDenied("Your role does not allow this in the active team.")
    return team


def _error_dict(exc: Exception) -> dict[str, Any]:
    """Field errors of a domain, Django or engine error, as ``{path: [messages]}``."""
    if isinstance(exc, DomainError):
        return exc.as_dict()
    if isinstance(exc, DjangoValidationError):
        return exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
    if hasattr(exc, "field"):
        return {str(exc.field): [str(getattr(exc, "message", exc))]}
    return {"detail": [str(exc)]}


def _catalog_items(version: CatalogVersion | None = None) -> list[dict[str, Any]]:
    if version is None:
        version, values = catalog_resolve(catalog=None)
    else:
        values = catalog_values(version=version)
    return list(values.values())


def _runs_for(request: HttpRequest) -> Any:
    return SimulationRun.objects.for_request(request).select_related("scenario", "sweep")
