"""Watched capacity plans (issue #14): a plan whose cluster stands for a fleet follows the fleet, is re-run on the
scenarios' re-evaluation machinery when the fleet (or catalog, or engine) changes, and says what moved in planner
terms; two plans or two plan runs compare side by side over the API, from the metric registry's plan figures."""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytestmark = pytest.mark.django_db

# 4 nodes of 8 A100 (the world's fleet: 32 GPUs). Steady 8-GPU work arrives at ~3.5 jobs/day x 2 days = 56
# GPUs of offered load on 32 GPUs: the queue grows from the start (shortfall early); on 16 servers (128 GPUs)
# the same demand and a 32-GPU job from day 30 fit.
PLAN: dict[str, Any] = {
    "horizon_days": 60, "failures": False, "replications": 3, "policy": "fifo",
    "clusters": [{"name": "main", "gpu": "H100-SXM", "gpus": 8}],
    "jobs": [{"name": "big", "gpus": 32, "duration_days": 20, "submit_day": 30, "deadline_day": 52}],
    "arrivals": [{"name": "research", "rate_per_day": 3.5, "gpus": 8, "duration_days": 2.0}],
}


@pytest.fixture
def linked(world: dict[str, Any]) -> Any:
    from planning.services.capacity_plans import capacity_plan_create

    fleet = world["x"]["fleet"]
    return capacity_plan_create(team=world["team"], user=world["users"]["planner"], name="Linked",
                                document=copy.deepcopy(PLAN), cluster_fleets={"main": fleet.pk}, watched=True)


def _run(plan: Any) -> Any:
    from simulations import services
    from simulations.services.capacity_plans import capacity_plan_submit

    run = capacity_plan_submit(plan=plan, user=None, params={"replications": 3})
    done = services.run_execute(run_id=run.pk)
    assert done.status == "succeeded", done.error
    return done


def test_linked_cluster_takes_the_fleet_shape_at_run_time(world: dict[str, Any], linked: Any) -> None:
    run = _run(linked)
    cluster = run.input_snapshot["document"]["clusters"][0]
    assert cluster["gpus"] == 32 and cluster["gpu"] == "A100-80GB" and cluster["nic_gbps"] == 200
    assert cluster["name"] == "main"
    snap = run.input_snapshot["capacity_plan"]["fleets"]
    assert snap == {str(world["x"]["fleet"].pk): {"name": world["x"]["fleet"].name,
                                                   "updated_at": world["x"]["fleet"].updated_at.isoformat()}}


def test_links_must_name_a_cluster_and_a_fleet_of_the_team(world: dict[str, Any], api_client_for: Any) -> None:
    client = api_client_for(world["users"]["planner"])
    body = {"name": "P", "document": PLAN, "cluster_fleets": {"nope": world["x"]["fleet"].pk}}
    r = client.post("/api/v1/capacity-plans/", body, format="json")
    assert r.status_code == 400 and "cluster_fleets.nope" in r.json()["errors"]
    body["cluster_fleets"] = {"main": world["y"]["fleet"].pk}  # the other team's fleet
    r = client.post("/api/v1/capacity-plans/", body, format="json")
    assert r.status_code == 400 and "cluster_fleets.main" in r.json()["errors"]
    body["cluster_fleets"] = {"main": world["x"]["fleet"].pk}
    r = client.post("/api/v1/capacity-plans/", {**body, "watched": True}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["watched"] is True and r.json()["cluster_fleets"] == {"main": world["x"]["fleet"].pk}


def test_fleet_change_reevaluates_the_watched_plan_once_with_a_planner_diff(world: dict[str, Any], linked: Any,
                                                                             client: Any) -> None:
    from planning import services as planning
    from simulations import services
    from simulations.models import ReEvaluation

    first = _run(linked)
    assert services.reevaluate_watched(plan_ids=[linked.pk]) == []  # nothing moved
    fleet = world["x"]["fleet"]
    planning.fleet_update(fleet=fleet, user=world["users"]["admin"], server_count=16)
    created = services.reevaluate_watched(plan_ids=[linked.pk])
    assert len(created) == 1
    assert services.reevaluate_watched(plan_ids=[linked.pk]) == []  # queued once per change
    reeval = created[0]
    assert reeval.capacity_plan_id == linked.pk and reeval.scenario_id is None
    assert reeval.previous_run_id == first.pk and reeval.reasons == [f"fleet {fleet.name} changed"]
    new = services.run_execute(run_id=reeval.new_run_id)
    assert new.status == "succeeded", new.error and new.trigger == "reevaluation"
    reeval = ReEvaluation.objects.get(pk=reeval.pk)
    assert reeval.completed_at is not None
    before = first.result["summary"]["first_shortfall_day"]["p50"]
    after = new.result["summary"]["first_shortfall_day"]["p50"]
    assert before is not None and (after is None or after > before)
    expected = (f"first shortfall moves from day {before:,.0f} to day {after:,.0f}" if after is not None
                else f"no shortfall any more (was day {before:,.0f})")
    assert reeval.summary.startswith(expected), reeval.summary
    assert "cluster main gpus 32 → 128" in reeval.summary
    assert "summary.utilization.p50" in reeval.changes
    linked.refresh_from_db()
    assert linked.last_evaluated_at is not None
    from simulations.services.webhooks import webhook_payload

    client.force_login(world["users"]["viewer"])  # the re-evaluations page lists the plan's diff
    page = client.get("/reevaluations/").content.decode()
    assert "Capacity plan" in page and f"/capacity/runs/{new.pk}/" in page and "no shortfall any more" in page
    payload = webhook_payload(reevaluation=reeval)
    assert payload["event"] == "capacity_plan.reevaluated" and "scenario" not in payload
    assert payload["capacity_plan"] == {"id": linked.pk, "name": "Linked"} and payload["summary"] == reeval.summary
    # the scenario-only call leaves plans alone; scenarios are not re-run by a plan-only call
    planning.fleet_update(fleet=fleet, user=world["users"]["admin"], server_count=8)
    assert all(r.capacity_plan_id is None for r in services.reevaluate_watched(scenario_ids=[]))


def test_unwatched_plans_are_not_reevaluated(world: dict[str, Any], linked: Any) -> None:
    from planning import services as planning
    from planning.services.capacity_plans import capacity_plan_update
    from simulations import services

    _run(linked)
    capacity_plan_update(plan=linked, user=world["users"]["planner"], watched=False)
    planning.fleet_update(fleet=world["x"]["fleet"], user=world["users"]["admin"], server_count=16)
    assert services.reevaluate_watched(plan_ids=[linked.pk]) == []


def test_compare_two_plans_and_two_runs(world: dict[str, Any], linked: Any, api_client_for: Any) -> None:
    from planning.services.capacity_plans import capacity_plan_create

    bigger = copy.deepcopy(PLAN)
    bigger["clusters"][0].update(gpu="A100-80GB", gpus=128, nic_gbps=200)
    other = capacity_plan_create(team=world["team"], user=world["users"]["planner"], name="Bigger", document=bigger)
    client = api_client_for(world["users"]["viewer"])
    r = client.get(f"/api/v1/capacity-plans/compare/?plans={linked.pk},{other.pk}")
    assert r.status_code == 400 and "has no finished run" in str(r.json()["errors"])
    a, b = _run(linked), _run(other)
    r = client.get(f"/api/v1/capacity-plans/compare/?plans={linked.pk},{other.pk}")
    assert r.status_code == 200, r.content
    body = r.json()
    assert [c["run"] for c in body["runs"]] == [a.pk, b.pk]
    rows = {m["metric"]: m for m in body["metrics"]}
    util = rows["summary.utilization.p50"]
    assert util["values"] == [a.result["summary"]["utilization"]["p50"], b.result["summary"]["utilization"]["p50"]]
    assert util["values"][0] > util["values"][1]  # 4x the GPUs for the same demand: less busy
    # each P50 comes with its P10-P90 band over the replications, and whether the runs' bands overlap
    assert util["bands"] == [[r.result["summary"]["utilization"][q] for q in ("p10", "p90")] for r in (a, b)]
    for (low, high), mid in zip(util["bands"], util["values"], strict=True):
        assert low <= mid <= high
    assert util["bands_overlap"] == (max(b_[0] for b_ in util["bands"]) <= min(b_[1] for b_ in util["bands"]))
    missed = rows["summary.deadlines_missed.p50"]
    assert missed["values"][0] >= missed["values"][1]
    if missed["values"][0] > missed["values"][1]:
        assert missed["best_run"] == b.pk
    assert body["versus_first"][0]["run"] == b.pk and "cluster main gpus 32 → 128" not in body["versus_first"][0]["summary"]
    assert client.get(f"/api/v1/capacity-plans/compare/?runs={a.pk},{b.pk}").json()["metrics"] == body["metrics"]
    # bad input and other teams
    assert client.get("/api/v1/capacity-plans/compare/?runs=1").status_code == 400
    assert client.get(f"/api/v1/capacity-plans/compare/?runs={a.pk},x").status_code == 400
    assert client.get(f"/api/v1/capacity-plans/compare/?runs={a.pk},{b.pk}&plans=1,2").status_code == 400
    outsider = api_client_for(world["other_admin"])
    r = outsider.get(f"/api/v1/capacity-plans/compare/?runs={a.pk},{b.pk}")  # named ids not found: 400, no data
    assert r.status_code == 400 and f"run {a.pk} not found" in str(r.json()["errors"])
    r = outsider.get(f"/api/v1/capacity-plans/compare/?plans={linked.pk},{other.pk}")
    assert r.status_code == 400 and "not found" in str(r.json()["errors"])


def test_band_overlap_rule() -> None:
    from simulations import metrics
    from simulations.services.plan_compare import _overlap, replication_band

    util = metrics.get("summary.utilization.p50")
    assert util is not None
    result = {"summary": {"utilization": {"p10": 0.5, "p50": 0.6, "p90": 0.7}}}
    assert replication_band(result, util) == [0.5, 0.7]
    assert replication_band({"summary": {"utilization": {"p50": 0.6}}}, util) is None
    assert _overlap([[0.5, 0.7], [0.65, 0.9]]) is True
    assert _overlap([[0.5, 0.6], [0.65, 0.9]]) is False
    assert _overlap([[0.5, 0.7], None]) is None and _overlap([[0.5, None], [0.6, 0.7]]) is None


def test_shortfall_phrases() -> None:
    from simulations.services.plan_compare import shortfall_phrase

    assert shortfall_phrase(214, 188) == "first shortfall moves from day 214 to day 188"
    assert shortfall_phrase(None, 188) == "a shortfall now appears on day 188 (none before)"
    assert shortfall_phrase(214, None) == "no shortfall any more (was day 214)"
    assert shortfall_phrase(214, 214.2) is None and shortfall_phrase(None, None) is None


def test_team_catalog_price_change_reevaluates_with_the_cost_move(world: dict[str, Any], linked: Any,
                                                                   api_client_for: Any) -> None:
    from planning import services as planning
    from simulations import services
    from simulations.models import ReEvaluation

    fork = world["x"]["catalog"]
    client = api_client_for(world["users"]["planner"])
    r = client.patch(f"/api/v1/capacity-plans/{linked.pk}/", {"catalog": world["y"]["catalog"].pk}, format="json")
    assert r.status_code == 400 and "catalog" in r.json()["errors"]  # another team's catalog
    r = client.patch(f"/api/v1/capacity-plans/{linked.pk}/", {"catalog": fork.pk}, format="json")
    assert r.status_code == 200 and r.json()["catalog"] == fork.pk, r.content
    linked.refresh_from_db()
    first = _run(linked)
    assert first.input_snapshot["catalog"]["version_id"] == fork.latest_version().pk
    item = fork.latest_version().items.get(key="HGX-A100-80GB")  # the server a cluster of A100s is priced by
    price = item.as_engine_item()["unit_price_usd"]
    planning.catalog_item_update(item=item, user=world["users"]["admin"], data={"unit_price_usd": price * 1.5})
    created = services.reevaluate_watched(plan_ids=[linked.pk])
    assert len(created) == 1 and any(r.startswith("catalog version v") for r in created[0].reasons), \
        created[0].reasons
    new = services.run_execute(run_id=created[0].new_run_id)
    assert new.status == "succeeded", new.error
    reeval = ReEvaluation.objects.get(pk=created[0].pk)
    a = first.result["summary"]["usd_per_delivered_gpu_hour"]["p50"]
    b = new.result["summary"]["usd_per_delivered_gpu_hour"]["p50"]
    assert b > a  # the same fleet costs more per delivered GPU-hour
    assert f"$/delivered GPU-h ${a:,.2f} → ${b:,.2f}" in reeval.summary and "price +50%" in reeval.summary, \
        reeval.summary
