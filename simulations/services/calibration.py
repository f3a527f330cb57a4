"""What a new calibration profile sets off (issue #16): its fleet's watched scenarios are re-evaluated now.

The profile itself is fitted by :mod:`planning.services.calibration`; a scenario's engine document carries it,
so the re-evaluation finds a changed input hash and names the profile versions in its reasons.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from planning.models import Fleet
from planning.services import calibration as planning_calibration
from simulations.services.reevaluation import reevaluate_watched


def calibration_fit_and_reevaluate(*, fleet: Fleet, user: Any, uploads: list[Any] | None = None, name: str = "",
                                   note: str = "") -> Any:
    """Fit the fleet's next profile version; after the commit, re-evaluate the watched scenarios it moves."""
    profile = planning_calibration.calibration_fit(fleet=fleet, user=user, uploads=uploads, name=name, note=note)
    ids = planning_calibration.fleet_calibration_scenarios(fleet=fleet)
    if ids:
        transaction.on_commit(lambda: reevaluate_watched(scenario_ids=ids))
    return profile
