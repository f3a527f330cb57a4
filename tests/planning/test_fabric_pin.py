"""Pinning a scenario to one of its team's fabric studies (issue #13): API field, service checks, the document.

A pinned study travels in the scenario's engine document (``fabric_study``), so it changes the input hash, shows
in the run snapshot and in the result (``routing_source``), and a watched scenario is re-evaluated with it.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def _study(world: dict[str, Any], side: str = "x", **params: Any) -> Any:
    from simulations import services

    actor = world["users"]["planner"] if side == "x" else world["other_admin"]
    run = services.run_submit(scenario=world[side]["scenario"], user=actor, kind="fabric",
                              params={"seeds": 2, **params})
    done = services.run_execute(run_id=run.pk)
    assert done is not None and done.status == "succeeded", done.error if done else None
    return done


def test_pinning_another_teams_study_is_refused_and_reveals_nothing(world: dict[str, Any],
                                                                   api_client_for: Any) -> None:
    theirs = _study(world, "y")
    client = api_client_for(world["users"]["planner"])
    url = f"/api/v1/scenarios/{world['x']['scenario'].pk}/"
    r = client.patch(url, {"fabric_study_run": theirs.pk}, format="json")
    assert r.status_code == 400, r.content
    body = r.json()
    assert "fabric_study_run" in body["errors"]
    assert "not found" in str(body["errors"]["fabric_study_run"])
    assert theirs.label not in r.content.decode() or not theirs.label
    missing = client.patch(url, {"fabric_study_run": 10**9}, format="json")
    assert missing.status_code == 400 and "not found" in str(missing.json()["errors"]["fabric_study_run"])
    # the refusal for another team's run reads exactly like the one for a run that does not exist
    assert str(body["errors"]["fabric_study_run"]).replace(str(theirs.pk), "N") == \
        str(missing.json()["errors"]["fabric_study_run"]).replace(str(10**9), "N")
    world["x"]["scenario"].refresh_from_db()
    assert world["x"]["scenario"].fabric_study == {}
    # and another team cannot pin our scenario at all: our scenario is a 404 to them
    ours = _study(world, "x")
    other = api_client_for(world["other_admin"])
    assert other.patch(url, {"fabric_study_run": ours.pk}, format="json").status_code == 404


def test_pinning_our_own_study_works_changes_the_document_and_the_result(world: dict[str, Any],
                                                                         api_client_for: Any) -> None:
    from planning import services as planning
    from simulations import services

    ours = _study(world, "x")
    scenario = world["x"]["scenario"]
    client = api_client_for(world["users"]["planner"])
    url = f"/api/v1/scenarios/{scenario.pk}/"
    before_doc = planning.scenario_document(scenario=scenario)
    assert "fabric_study" not in before_doc
    r = client.patch(url, {"fabric_study_run": ours.pk}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["fabric_study_run"] == ours.pk
    assert body["fabric_study"]["run"] == ours.pk and body["fabric_study"]["fabric"] == "infiniband"
    assert [s["p50"] for s in body["fabric_study"]["shares"]] == [row["p50"] for row in ours.result["table"]]
    assert client.get(url).json()["fabric_study_run"] == ours.pk
    # the engine document carries the study: a new input hash, the snapshot and the result name it
    doc = client.get(f"{url}document/").json()["document"]
    assert doc["fabric_study"]["run"] == ours.pk
    scenario.refresh_from_db()
    run = services.run_submit(scenario=scenario, user=world["users"]["planner"], kind="predict")
    assert run.input_snapshot["document"]["fabric_study"]["run"] == ours.pk
    done = services.run_execute(run_id=run.pk)
    assert done is not None and done.status == "succeeded", done.error if done else None
    result: dict[str, Any] = done.result or {}
    source = result["routing_source"]
    assert source["kind"] == "study" and source["study"]["run"] == ours.pk  # the IB scenario routes adaptively
    assert any(f"fabric study run #{ours.pk}" in n for n in result["notes"])
    # unpin: back to the shipped tables
    r = client.patch(url, {"fabric_study_run": None}, format="json")
    assert r.status_code == 200 and r.json()["fabric_study"] == {} and r.json()["fabric_study_run"] is None
    assert "fabric_study" not in client.get(f"{url}document/").json()["document"]


def test_only_a_succeeded_fabric_study_can_be_pinned(world: dict[str, Any], api_client_for: Any) -> None:
    from simulations import services

    planner = world["users"]["planner"]
    scenario = world["x"]["scenario"]
    queued = services.run_submit(scenario=scenario, user=planner, kind="fabric", params={"seeds": 1})
    predict = services.run_submit(scenario=scenario, user=planner, kind="predict")
    client = api_client_for(planner)
    for run, words in ((queued, "has not succeeded"), (predict, "not a fabric study")):
        r = client.patch(f"/api/v1/scenarios/{scenario.pk}/", {"fabric_study_run": run.pk}, format="json")
        assert r.status_code == 400, r.content
        assert words in str(r.json()["errors"]["fabric_study_run"])
    # a viewer may not pin (scenario update needs the plan capability)
    ours = _study(world, "x")
    viewer = api_client_for(world["users"]["viewer"])
    assert viewer.patch(f"/api/v1/scenarios/{scenario.pk}/", {"fabric_study_run": ours.pk},
                        format="json").status_code == 403


def test_a_watched_scenario_is_reevaluated_with_the_study_and_says_so(world: dict[str, Any]) -> None:
    from simulations import services
    from simulations.services.fabric import scenario_pin_fabric_study

    planner = world["users"]["planner"]
    scenario = world["x"]["scenario"]
    scenario.watched = True
    scenario.save(update_fields=["watched"])
    run = services.run_submit(scenario=scenario, user=planner, kind="predict")
    services.run_execute(run_id=run.pk)
    needed, _reasons, _last = services.scenario_needs_reevaluation(scenario=scenario)
    assert not needed
    ours = _study(world, "x")
    scenario = scenario_pin_fabric_study(scenario=scenario, run=ours, user=planner)
    needed, reasons, _last = services.scenario_needs_reevaluation(scenario=scenario)
    assert needed and any(f"fabric study none → run #{ours.pk}" in r for r in reasons), reasons
    created = services.reevaluate_watched(scenario_ids=[scenario.pk])
    assert len(created) == 1
    new_run = created[0].new_run
    assert new_run is not None and new_run.input_snapshot["document"]["fabric_study"]["run"] == ours.pk
