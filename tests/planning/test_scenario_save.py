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
    from planning import services
    from planning.models import Workload

    def boom(**_: Any) -> Any:
        raise RuntimeError("database went away")

    monkeypatch.setattr(services.scenarios, "scenario_create", boom)
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
