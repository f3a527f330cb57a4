"""The demo data (`manage.py seed_demo`, run by `make run`): idempotent, and every scenario predicts; it shows a
mixture-of-experts job on one RoCE fleet with hashed vs adaptive routing, and the adaptive one is faster."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_seed_demo_is_idempotent_and_every_scenario_predicts(db: Any) -> None:
    from engine.performance.api import predict
    from planning import services
    from planning.models import Scenario

    call_command("seed_demo", verbosity=0)
    count = Scenario.objects.filter(team__slug="demo").count()
    call_command("seed_demo", verbosity=0)
    assert Scenario.objects.filter(team__slug="demo").count() == count
    steps = {}
    for s in Scenario.objects.filter(team__slug="demo"):
        doc, _version, values = services.scenario_resolve(scenario=s)
        result = predict(doc, catalog=values)
        assert result.fits, s.name
        steps[s.name] = result.step_time_s
    ecmp, adaptive = (steps["Mixtral-8x7B on 2k H200 RoCE, ECMP"],
                      steps["Mixtral-8x7B on 2k H200 RoCE, adaptive routing"])
    assert adaptive < ecmp
    moe = Scenario.objects.get(team__slug="demo", name="Mixtral-8x7B on 2k H200 RoCE, ECMP")
    assert moe.workload.model["moe"]["experts"] == 8 and moe.cluster == {"routing": "ecmp"}
