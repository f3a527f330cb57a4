"""Team roles and what each may do.

viewer  read everything of the team
planner read, create/edit/run scenarios, fleets, workloads, sweeps, reports; export
finance read, export, own API tokens
admin   everything, plus team management and catalog edits
"""

from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    PLANNER = "planner", "Planner"
    FINANCE = "finance", "Finance"
    ADMIN = "admin", "Admin"


class Capability:
    READ = "read"
    PLAN = "plan"  # create/edit/run planning objects
    EXPORT = "export"
    TOKEN = "token"  # hold API tokens
    CATALOG = "catalog"  # edit/fork vendor catalogs
    MANAGE = "manage"  # manage team members and webhooks

    ALL = (READ, PLAN, EXPORT, TOKEN, CATALOG, MANAGE)


ROLE_CAPABILITIES: dict[str, frozenset[str]] = {
    Role.VIEWER: frozenset({Capability.READ}),
    Role.PLANNER: frozenset({Capability.READ, Capability.PLAN, Capability.EXPORT, Capability.TOKEN}),
    Role.FINANCE: frozenset({Capability.READ, Capability.EXPORT, Capability.TOKEN}),
    Role.ADMIN: frozenset(Capability.ALL),
}


def role_allows(role: str, capability: str) -> bool:
    return capability in ROLE_CAPABILITIES.get(role, frozenset())
