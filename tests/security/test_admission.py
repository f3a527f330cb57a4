"""Admission by estimate (issue #23): every run kind's work is estimated before it is queued and refused with a 400
naming the field and the estimate; a sweep's or a replication fan-out's children share one limit and are each
checked before anything is written; nothing expensive runs at submit time (asserted with mocks, never with clocks).
"""

from __future__ import annotations

import copy
import importlib
from typing import Any
from unittest import mock

import pytest
from django.test import override_settings

from tests.security.seed import CLUSTER, MODEL, TRAINING

pytestmark = pytest.mark.django_db

MILLION = 1 << 20
BIG_CLUSTER = {"gpu": "B300", "gpus": MILLION, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 800,
               "fabric": "infiniband", "topology": "multi-plane", "oversubscription": 1.0}
LAYOUT = {"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": "auto", "sequence_parallel": False}


def _scenario(world: dict[str, Any], name: str, cluster: dict[str, Any]) -> Any:
    from planning import services

    dp = cluster["gpus"] // 8
    workload = services.workload_create(
        team=world["team"], user=world["users"]["admin"], name=f"{name} workload", model=copy.deepcopy(MODEL),
        training={**TRAINING, "global_batch": max(512, dp)}, parallelism={**LAYOUT, "dp": dp})
    return services.scenario_create(team=world["team"], user=world["users"]["admin"], name=name, workload=workload,
                                    cluster=copy.deepcopy(cluster))


def _errors(resp: Any) -> dict[str, list[str]]:
    body = resp.json()
    assert body["status"] == resp.status_code, body
    return dict(body["errors"])


@pytest.fixture
def no_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's allocations: none may happen while a submission is admitted."""
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a submit-time check built simulation arrays")

    # study binds simulate by name at import: imported first under the patch, it would keep the forbidden function
    # after teardown (the undo restores what it held then), and a later test's fabric study would fail
    importlib.import_module("engine.flowsim.study")
    for name in ("cable_links", "bundle_links", "_generate", "simulate"):
        monkeypatch.setattr(f"engine.flowsim.simulate.{name}", forbidden)
    monkeypatch.setattr("engine.flowsim.study.simulate", forbidden)
    monkeypatch.setattr("engine.flowsim.traffic.finish", forbidden)


def _counts() -> tuple[int, int]:
    from simulations.models import SimulationRun, Sweep

    return SimulationRun.objects.count(), Sweep.objects.count()


# ------------------------------------------------------------------------------------------- fabric studies
def test_million_gpu_study_is_refused_at_submit_naming_the_field_and_the_estimate(
        world: dict[str, Any], api_client_for: Any, no_arrays: None) -> None:
    scenario = _scenario(world, "1M B300", BIG_CLUSTER)
    client = api_client_for(world["users"]["planner"])
    before = _counts()
    cases = [
        ({}, "flows per seed"),  # ring all-reduce over every GPU, three routing variants: 9.4 M flows a seed
        ({"traffic": "all-to-all"}, "flows per seed"),  # ~1.4e11 flows: the 1 TiB allocation of the probe
        ({"traffic": "permutation", "routing": "ecmp", "seeds": 20}, "fabric simulation"),  # fits memory, not time
    ]
    for params, words in cases:
        resp = client.post(f"/api/v1/scenarios/{scenario.pk}/run/", {"kind": "fabric", "params": params},
                           format="json")
        assert resp.status_code == 400, (params, resp.content)
        errors = _errors(resp)
        field = next(iter(errors))
        assert field in ("params.ranks", "params.seeds"), errors
        assert words in errors[field][0] and "would" in errors[field][0], errors
    assert _counts() == before


def test_the_engine_itself_refuses_before_allocating(no_arrays: None) -> None:
    """A worker (or the CLI) given such a study refuses it before the first array, naming ranks."""
    from engine.flowsim.study import study
    from engine.schema.bounds import WorkLimitError

    doc = {"model": copy.deepcopy(MODEL), "training": {**TRAINING, "global_batch": MILLION},
           "parallelism": {**LAYOUT, "dp": MILLION // 8}, "cluster": dict(BIG_CLUSTER)}
    with pytest.raises(WorkLimitError) as refused:
        study(doc, "all-to-all", seeds=2)
    assert refused.value.field == "ranks" and "flows per seed" in refused.value.message


def test_flow_estimate_matches_the_simulator_exactly() -> None:
    """The admission counts are the generators' counts (flows and links), not a guess."""
    from engine.flowsim.simulate import estimate, simulate

    doc = {"model": copy.deepcopy(MODEL), "training": dict(TRAINING),
           "parallelism": {**LAYOUT, "dp": 4}, "cluster": {**CLUSTER, "gpus": 32}}
    for traffic, routing, qps in (("ring-allreduce", "ecmp", 1), ("tree-allreduce", "adaptive", 1),
                                  ("all-to-all", "ecmp", 2), ("permutation", "ecmp-qp", 4),
                                  ("ring-allreduce:dp", "pinned", 1)):
        est = estimate(doc, traffic, routing=routing, qps=qps, seeds=1)
        out = simulate(doc, traffic, routing=routing, qps=qps, seeds=1)
        assert (est.flows, est.network_flows, est.links) == (out["flows"], out["network_flows"],
                                                             out["simulated_links"]), traffic


def test_a_study_that_fits_a_seed_but_not_all_seeds_names_params_seeds(
        world: dict[str, Any], api_client_for: Any, no_arrays: None) -> None:
    scenario = _scenario(world, "4k H100", {**BIG_CLUSTER, "gpu": "H100-SXM", "gpus": 4096, "nic_gbps": 400,
                                            "topology": "fat-tree"})
    client = api_client_for(world["users"]["planner"])
    with override_settings(FP_RUN_BUDGET_S=1.0):
        resp = client.post(f"/api/v1/scenarios/{scenario.pk}/run/",
                           {"kind": "fabric", "params": {"routing": "ecmp", "traffic": "permutation", "seeds": 100}},
                           format="json")
    assert resp.status_code == 400, resp.content
    message = _errors(resp)["params.seeds"][0]
    assert "lower params.seeds to at most" in message and "FP_RUN_BUDGET_S" in message


def test_memory_budget_is_a_setting(world: dict[str, Any], api_client_for: Any, no_arrays: None) -> None:
    client = api_client_for(world["users"]["planner"])
    with override_settings(FP_RUN_MAX_MEMORY_MB=1):
        resp = client.post(f"/api/v1/scenarios/{world['x']['scenario'].pk}/run/",
                           {"kind": "fabric", "params": {"seeds": 1}}, format="json")
    assert resp.status_code == 400
    assert "FP_RUN_MAX_MEMORY_MB" in _errors(resp)["params.ranks"][0]


def test_every_child_of_a_fabric_sweep_is_checked_before_anything_is_written(
        world: dict[str, Any], api_client_for: Any, no_arrays: None) -> None:
    """The probe's 36-child sweep of which 12 failed at run time on a placement: now refused whole, at submit."""
    client = api_client_for(world["users"]["planner"])
    before = _counts()
    # 32 GPUs = 4 nodes: a fragmented placement with any node taken cannot hold the 32-rank job (9 of 36 children)
    axes = {"params.placement": ["packed", "random", "fragmented"], "params.fragmentation": [0.0, 0.2, 0.5, 0.9],
            "params.routing": ["ecmp", "adaptive", "pinned"]}
    resp = client.post(f"/api/v1/scenarios/{world['x']['scenario'].pk}/sweep/",
                       {"kind": "fabric", "axes": axes, "params": {"seeds": 1}}, format="json")
    assert resp.status_code == 400, resp.content
    errors = _errors(resp)
    assert any(k.startswith("axes.params.fragmentation") for k in errors), errors
    text = " ".join(m for v in errors.values() for m in v)
    assert 'params.placement="fragmented"' in text and "leaves fewer than the job's 4 nodes" in text
    assert _counts() == before


def test_a_sweep_of_too_heavy_children_is_refused_before_expansion_work(
        world: dict[str, Any], api_client_for: Any, no_arrays: None) -> None:
    scenario = _scenario(world, "1M B300 sweep", BIG_CLUSTER)
    client = api_client_for(world["users"]["planner"])
    before = _counts()
    resp = client.post(f"/api/v1/scenarios/{scenario.pk}/sweep/",
                       {"kind": "fabric", "axes": {"params.seed": list(range(512))}}, format="json")
    assert resp.status_code == 400, resp.content
    assert "flows per seed" in " ".join(m for v in _errors(resp).values() for m in v)
    assert _counts() == before


# ------------------------------------------------------------------------------------------- capacity plans
def _plan(world: dict[str, Any], document: dict[str, Any], name: str = "Demo") -> Any:
    from planning.services.capacity_plans import capacity_plan_create

    return capacity_plan_create(team=world["team"], user=world["users"]["planner"], name=name, document=document)


@pytest.mark.parametrize("horizon", ["1e308", "-0.0", "1" + "0" * 400, "3651", "true", '"365"', "NaN"])
def test_hostile_horizons_are_refused_before_any_cluster_is_parsed(
        world: dict[str, Any], api_client_for: Any, horizon: str) -> None:
    import json

    from engine.fleet.examples import demo_plan

    client = api_client_for(world["users"]["planner"])
    text = json.dumps(demo_plan()).replace('"horizon_days": 365', f'"horizon_days": {horizon}')
    with mock.patch("engine.fleet.plan.parse_fleet_cluster", side_effect=AssertionError("parsed a cluster")):
        resp = client.post("/api/v1/capacity-plans/", f'{{"name": "x", "document": {text}}}',
                           content_type="application/json")
    assert resp.status_code == 400, resp.content
    assert any(k in ("document.horizon_days", "detail") for k in _errors(resp)), resp.content


def test_a_plan_run_over_the_budget_names_replications_not_monte_carlo(
        world: dict[str, Any], api_client_for: Any) -> None:
    from engine.fleet.examples import demo_plan

    plan = _plan(world, demo_plan())  # the shipped file: 10 replications x 9 purchase options = 100 simulations
    client = api_client_for(world["users"]["planner"])
    before = _counts()
    with mock.patch("engine.fleet.core.simulate_prepared", side_effect=AssertionError("simulated at submit")):
        resp = client.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {}, format="json")
        assert resp.status_code == 400, resp.content
        message = _errors(resp)["document.replications"][0]
        assert "lower document.replications to at most" in message and "monte_carlo" not in message
        resp = client.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {"params": {"replications": 50}}, format="json")
        assert resp.status_code == 400 and "params.replications" in _errors(resp)
        with override_settings(FP_RUN_BUDGET_S=0.5):  # not even one replication: the horizon and demand
            resp = client.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {"params": {"replications": 1}},
                               format="json")
        assert resp.status_code == 400 and "document.horizon_days" in _errors(resp), resp.content
    assert _counts() == before


def test_the_seeded_demo_plan_fits_the_run_budget(world: dict[str, Any], api_client_for: Any) -> None:
    from engine.fleet.estimate import estimate_plan
    from engine.fleet.examples import demo_plan
    from engine.fleet.plan import parse_plan
    from planning.management.commands.seed_demo import DEMO_REPLICATIONS
    from simulations import limits

    document = {**demo_plan(), "replications": DEMO_REPLICATIONS}
    assert estimate_plan(parse_plan(document)).seconds <= limits.run_budget_s() / 2
    plan = _plan(world, document)
    resp = api_client_for(world["users"]["planner"]).post(f"/api/v1/capacity-plans/{plan.pk}/run/", {},
                                                          format="json")
    assert resp.status_code == 202, resp.content


def test_budget_errors_name_settings_the_kind_has() -> None:
    from simulations.services.params import budget_hint

    assert "replications" in budget_hint("fleet") and "monte_carlo" not in budget_hint("fleet")
    assert "params.seeds" in budget_hint("fabric") and "monte_carlo" not in budget_hint("fabric")
    assert "monte_carlo" in budget_hint("tco")


def test_replicate_shares_the_child_limit_and_checks_each_child(world: dict[str, Any], api_client_for: Any) -> None:
    from engine.fleet.examples import demo_plan

    plan = _plan(world, {**demo_plan(), "replications": 4})
    client = api_client_for(world["users"]["planner"])
    before = _counts()
    with mock.patch("simulations.models.SimulationRun.objects.bulk_create",
                    side_effect=AssertionError("children written")):
        resp = client.post(f"/api/v1/capacity-plans/{plan.pk}/replicate/", {"replications": 1000, "chunk": 1},
                           format="json")
        assert resp.status_code == 400, resp.content
        assert "FP_MAX_SWEEP_RUNS=512" in _errors(resp)["replications"][0]
        with override_settings(FP_MAX_SWEEP_RUNS=10):
            resp = client.post(f"/api/v1/capacity-plans/{plan.pk}/replicate/", {"replications": 110, "chunk": 10},
                               format="json")
        assert resp.status_code == 400 and "FP_MAX_SWEEP_RUNS=10" in _errors(resp)["replications"][0]
        resp = client.post(f"/api/v1/capacity-plans/{plan.pk}/replicate/", {"replications": 1000, "chunk": 200},
                           format="json")  # 200 replications of the demo in one child: past the run budget
        assert resp.status_code == 400 and "lower chunk to at most" in _errors(resp)["chunk"][0], resp.content
    assert _counts() == before
