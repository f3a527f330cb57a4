"""Parse once, size once (issue #21): a run submit, a run's execution and a live estimate each parse the scenario
document once and size its fabric once; the live estimate runs the performance model once (its cost figures reuse
the prediction). Counted at every import site of the parser, the fabric sizing and the model's ``evaluate``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.cost._engine_calls import engine_calls

pytestmark = pytest.mark.django_db

APP_MODULES = (
    "planning.services.documents", "planning.services.scenarios", "simulations.services.runs",
    "simulations.services.execution", "simulations.services.preview", "simulations.services.sweeps",
    "simulations.services.fabric", "portal.views.scenarios", "simulations.api.views",
)
KINDS = ("predict", "search", "tco", "fabric")


def _params(kind: str) -> dict[str, Any]:
    return {"seeds": 1} if kind == "fabric" else {}


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_submit_parses_once(world: dict[str, Any], kind: str) -> None:
    from simulations import services

    with engine_calls(*APP_MODULES) as calls:
        run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind=kind,
                                  params=_params(kind), force=True)
    assert run.status == "queued" and calls.counts() == (1, 1, 0), str(calls)


def test_a_run_submit_from_the_api_and_the_portal_parses_once(
    world: dict[str, Any], api_client_for: Any, client: Any
) -> None:
    from django.urls import reverse

    scenario, user = world["x"]["scenario"], world["users"]["planner"]
    with engine_calls(*APP_MODULES) as calls:
        r = api_client_for(user).post(f"/api/v1/scenarios/{scenario.pk}/run/", {"kind": "tco", "force": True},
                                      format="json")
    assert r.status_code == 202 and calls.counts() == (1, 1, 0), f"API: {calls}"
    client.force_login(user)
    with engine_calls(*APP_MODULES) as calls:  # the run button: a TCO run with Monte Carlo and sensitivity
        r = client.post(reverse("scenario-run", args=[scenario.pk]), {"kind": "tco", "force": "1"})
    assert r.status_code == 302 and calls.counts() == (1, 1, 0), f"portal: {calls}"


@pytest.mark.parametrize("kind", KINDS)
def test_an_execution_parses_once(world: dict[str, Any], kind: str) -> None:
    from simulations import services

    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind=kind,
                              params=_params(kind), force=True)
    with engine_calls(*APP_MODULES) as calls:
        done = services.run_execute(run_id=run.pk)
    assert done.status == "succeeded", done.error
    assert calls.counts() == (1, 1, 0 if kind == "fabric" else 1), str(calls)


def test_a_tco_execution_with_monte_carlo_and_sensitivity_parses_once(world: dict[str, Any]) -> None:
    """Cost ranges only (the catalog's defaults): one performance point, so one parse, sizing and evaluation."""
    from simulations import services

    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="tco",
                              params={"monte_carlo": 200, "sensitivity": True}, force=True)
    with engine_calls(*APP_MODULES) as calls:
        done = services.run_execute(run_id=run.pk)
    assert done.status == "succeeded", done.error
    assert done.result["monte_carlo"]["performance_points"] == 1 and done.result["sensitivity"]
    assert calls.counts() == (1, 1, 1), str(calls)


def test_sweep_children_parse_once_each(world: dict[str, Any]) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    with engine_calls(*APP_MODULES) as calls:
        sweep = services.sweep_submit(scenario=world["x"]["scenario"], axes={"cluster.nic_gbps": [100, 200, 400]},
                                      user=world["users"]["planner"], kind="tco")
    assert calls.counts() == (3, 3, 0), f"submit: {calls}"  # each child's document checked once
    for child in SimulationRun.objects.filter(sweep=sweep):
        with engine_calls(*APP_MODULES) as calls:
            done = services.run_execute(run_id=child.pk)
        assert done.status == "succeeded" and calls.counts() == (1, 1, 1), f"{child.label}: {calls}"


def _document(world: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    from planning import services as planning

    document, _version, values = planning.scenario_resolve(scenario=world["x"]["scenario"])
    return document, values


def test_a_live_estimate_parses_and_predicts_once(world: dict[str, Any]) -> None:
    from simulations import services

    document, values = _document(world)
    with engine_calls(*APP_MODULES) as calls:
        out = services.preview(document=document, catalog=values)
    assert calls.counts() == (1, 1, 1), str(calls)
    assert "cost_error" not in out and out["usd_per_million_tokens"] > 0


def test_the_live_estimate_has_the_figures_of_predict_and_tco(world: dict[str, Any]) -> None:
    """Reusing the prediction changes no figure: the estimate is what predict and tco give separately."""
    from engine.cost.tco import tco
    from engine.performance.api import predict
    from simulations import services
    from simulations.services.hashing import jsonable
    from simulations.services.preview import PREVIEW_COSTS, PREVIEW_FIELDS

    document, values = _document(world)
    out = services.preview(document=document, catalog=values)
    perf = jsonable(predict(document, catalog=values).to_dict())
    costs = jsonable(tco(document, catalog=values))["tco"]
    assert {k: out[k] for k in PREVIEW_FIELDS} == {k: perf[k] for k in PREVIEW_FIELDS}
    assert out["breakdown_s"] == perf["breakdown_s"] and out["parallelism"] == perf["parallelism"]
    assert {k: out[k] for k in PREVIEW_COSTS} == {k: costs[k] for k in PREVIEW_COSTS}


def test_the_portal_and_api_live_estimates_parse_and_predict_once(
    world: dict[str, Any], client: Any, api_client_for: Any
) -> None:
    from django.urls import reverse

    from tests.portal.conftest import BUILDER_POST

    user = world["users"]["planner"]
    client.force_login(user)
    with engine_calls(*APP_MODULES) as calls:  # the builder's validation parses; the estimate runs on that
        r = client.post(reverse("scenario-preview"), BUILDER_POST, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and r.context["estimate"] and not r.context["errors"], r.context["errors"]
    assert calls.counts() == (1, 1, 1), f"portal: {calls}"
    with engine_calls(*APP_MODULES) as calls:
        r = api_client_for(user).post("/api/v1/preview/", {"scenario": world["x"]["scenario"].pk}, format="json")
    assert r.status_code == 200 and "cost_error" not in r.json(), r.content
    assert calls.counts() == (1, 1, 1), f"API: {calls}"
