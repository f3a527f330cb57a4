"""scenario_save: the scenario builder's write (workload + scenario in one transaction, validated first)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.errors import ValidationError
from tests.conftest import CLUSTER, MODEL, PARALLELISM, TRAINING

pytestmark = pytest.mark.django_db


def _save(team: Any, user: Any, **overrides: Any) -> Any:
    from planning import services

    fields: dict[str, Any] = {
        "name": "GPT on 32 A100", "description": "builder", "workload_name": "GPT-1.7B",
        "model": copy.deepcopy(MODEL), "training": copy.deepcopy(TRAINING), "parallelism": copy.deepcopy(PARALLELISM),
        "cluster": copy.deepcopy(CLUSTER), "costs": {"usd_per_kwh": 0.08}, "watched": False,
    }
    fields.update(overrides)
    return services.scenario_save(team=team, user=user, **fields)


def test_creates_workload_and_scenario(team: Any, planner_user: Any, default_catalog: Any) -> None:
    from planning import services
    from planning.models import ObjectChange

    s = _save(team, planner_user, watched=True, uncertainty={"distribution": "pert"},
              costs={"usd_per_kwh": {"low": 0.06, "likely": 0.08, "high": 0.12}})
    assert s.team == team and s.watched and s.workload.name == "GPT-1.7B" and s.workload.model == MODEL
    assert s.costs["usd_per_kwh"]["high"] == 0.12 and s.uncertainty == {"distribution": "pert"}
    doc = services.scenario_document(scenario=s)
    assert doc["cluster"]["gpus"] == 32 and doc["uncertainty"]["distribution"] == "pert"
    logged = set(ObjectChange.objects.values_list("object_type", "action"))
    assert {("workload", "create"), ("scenario", "create")} <= logged


def test_invalid_document_writes_nothing(team: Any, planner_user: Any, default_catalog: Any) -> None:
    from planning.models import Scenario, Workload

    with pytest.raises(ValidationError) as exc:
        _save(team, planner_user, model={**MODEL, "heads": 23})
    assert "model.heads" in exc.value.detail
    with pytest.raises(ValidationError) as exc:
        _save(team, planner_user, costs={"usd_per_kwh": {"low": 0.2, "likely": 0.08, "high": 0.1}})
    assert "costs.usd_per_kwh" in exc.value.detail
    with pytest.raises(ValidationError) as exc:
        _save(team, planner_user, name="  ")
    assert "name" in exc.value.detail
    assert not Workload.objects.exists() and not Scenario.objects.exists()


def test_rolls_back_the_workload_when_the_scenario_write_fails(
    team: Any, planner_user: Any, default_catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planning.models import Scenario, Workload

    def boom(**_: Any) -> Any:
        raise RuntimeError("database went away")

    monkeypatch.setattr(Scenario.objects, "create", boom)
    with pytest.raises(RuntimeError):
        _save(team, planner_user)
    assert not Workload.objects.exists()


def test_update_edits_the_workload_in_place(team: Any, planner_user: Any, default_catalog: Any) -> None:
    s = _save(team, planner_user)
    workload_id = s.workload_id
    s2 = _save(team, planner_user, scenario=s, name="renamed", training={**TRAINING, "global_batch": 1024},
               cluster={**CLUSTER, "nic_gbps": 400})
    assert s2.pk == s.pk and s2.name == "renamed" and s2.workload_id == workload_id
    s2.refresh_from_db()
    assert s2.workload.training["global_batch"] == 1024 and s2.cluster["nic_gbps"] == 400


def test_update_does_not_change_a_shared_workload(team: Any, planner_user: Any, default_catalog: Any) -> None:
    from planning import services

    s = _save(team, planner_user)
    other = services.scenario_create(team=team, user=planner_user, name="other", workload=s.workload,
                                     cluster=copy.deepcopy(CLUSTER))
    s2 = _save(team, planner_user, scenario=s, training={**TRAINING, "global_batch": 1024})
    other.refresh_from_db()
    assert s2.workload_id != other.workload_id
    assert other.workload.training["global_batch"] == 512 and s2.workload.training["global_batch"] == 1024


def test_fleet_supplies_the_cluster(world: dict[str, Any]) -> None:
    from planning import services

    team, user = world["team"], world["users"]["planner"]
    fleet = world["x"]["fleet"]
    s = _save(team, user, fleet=fleet, cluster={})
    doc = services.scenario_document(scenario=s)
    assert s.fleet == fleet and s.cluster == {}
    assert doc["cluster"]["gpus"] == fleet.gpus and doc["cluster"]["gpu"] == "A100-80GB"
    # back to an ad-hoc cluster clears the fleet
    s = _save(team, user, scenario=s, fleet=None, cluster=copy.deepcopy(CLUSTER))
    assert s.fleet is None and s.cluster["gpus"] == 32


def test_other_teams_objects_are_refused(world: dict[str, Any]) -> None:
    from planning.models import Workload

    team, user = world["team"], world["users"]["planner"]
    before = Workload.objects.count()
    with pytest.raises(ValidationError) as exc:
        _save(team, user, fleet=world["y"]["fleet"], cluster={})
    assert "fleet" in exc.value.detail
    with pytest.raises(ValidationError) as exc:
        _save(team, user, scenario=world["y"]["scenario"])
    assert "scenario" in exc.value.detail
    assert Workload.objects.count() == before


# --- parse once, size once (issue #21): the document is checked up front and the write reuses that check ------
APP_MODULES = ("planning.services.scenarios", "portal.views.scenarios")


def test_a_save_parses_the_document_once(world: dict[str, Any]) -> None:
    from tests.engine.cost._engine_calls import engine_calls

    team, user = world["team"], world["users"]["planner"]
    with engine_calls(*APP_MODULES) as calls:
        s = _save(team, user)
    assert calls.counts() == (1, 1, 0), f"create: {calls}"
    with engine_calls(*APP_MODULES) as calls:
        _save(team, user, scenario=s, costs={"usd_per_kwh": 0.09})
    assert calls.counts() == (1, 1, 0), f"update: {calls}"
    shared = world["x"]["scenario"]  # shares its workload with the fleet scenario: the save writes a new one
    with engine_calls(*APP_MODULES) as calls:
        _save(team, user, scenario=shared, name=shared.name, training={**TRAINING, "global_batch": 1024})
    assert calls.counts() == (1, 1, 0), f"update of a shared workload: {calls}"


def test_a_save_whose_catalog_changed_meanwhile_is_checked_again(
    team: Any, planner_user: Any, default_catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The up-front check stands only for the same document on the same catalog values."""
    from planning import services
    from tests.engine.cost._engine_calls import engine_calls

    real = services.scenarios.catalog_resolve
    calls_made: list[int] = []

    def resolve(**kwargs: Any) -> Any:  # the second resolution (the write's) sees a changed price
        version, values = real(**kwargs)
        calls_made.append(1)
        if len(calls_made) > 1:
            values = {**values, "A100-80GB": {**values["A100-80GB"], "unit_price_usd": 1.0}}
        return version, values

    monkeypatch.setattr(services.scenarios, "catalog_resolve", resolve)
    with engine_calls(*APP_MODULES) as calls:
        _save(team, planner_user)
    assert len(calls_made) == 2 and calls.counts() == (2, 2, 0), str(calls)


def test_the_builder_saves_with_one_parse(client: Any, world: dict[str, Any]) -> None:
    """Saving from the portal builder (new, then edit): the document is parsed and its fabric sized once."""
    from django.urls import reverse

    from planning.models import Scenario
    from tests.engine.cost._engine_calls import engine_calls
    from tests.portal.conftest import BUILDER_POST

    client.force_login(world["users"]["planner"])
    with engine_calls(*APP_MODULES) as calls:
        r = client.post(reverse("scenario-new"), BUILDER_POST)
    assert r.status_code == 302 and calls.counts() == (1, 1, 0), f"new: {calls}"
    s = Scenario.objects.get(name=BUILDER_POST["name"])
    with engine_calls(*APP_MODULES) as calls:
        r = client.post(reverse("scenario-edit", args=[s.pk]), {**BUILDER_POST, "usd_per_kwh": 0.09})
    assert r.status_code == 302 and calls.counts() == (1, 1, 0), f"edit: {calls}"
    s.refresh_from_db()
    assert s.costs["usd_per_kwh"] == 0.09
    # an invalid document still lands on its field, from the one check scenario_save makes
    with engine_calls(*APP_MODULES) as calls:
        r = client.post(reverse("scenario-edit", args=[s.pk]), {**BUILDER_POST, "heads": 31})
    assert r.status_code == 400 and calls.parses == 1, str(calls)
    assert "heads" in r.context["form"].errors
