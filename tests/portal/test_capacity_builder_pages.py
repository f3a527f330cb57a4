"""The capacity-plan builder and the plan comparison page (issue #14): a plan built from the team's fleets and
workloads, a demand-plan CSV through the same import service as the API, errors inline, other teams' pages 404."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_for(client: Any) -> Any:
    def login(user: Any) -> Any:
        client.force_login(user)
        return client
    return login


def _post(world: dict[str, Any], **extra: Any) -> dict[str, Any]:
    data = {"name": "Built", "horizon_days": "60", "policy": "backfill", "failures": "", "watched": "on",
            "fleets": [str(world["x"]["fleet"].pk)], "extra_clusters": "", "candidates": "",
            "arrivals": json.dumps([{"name": "r", "rate_per_day": 1, "gpus": 8, "duration_days": 1}]),
            "jobs-TOTAL_FORMS": "2", "jobs-INITIAL_FORMS": "0", "jobs-MIN_NUM_FORMS": "0", "jobs-MAX_NUM_FORMS": "200",
            "jobs-0-name": "pretrain", "jobs-0-workload": str(world["x"]["workload"].pk), "jobs-0-gpus": "32",
            "jobs-0-submit_day": "0", "jobs-0-deadline_day": "50", "jobs-0-priority": "5",
            "jobs-1-name": "eval", "jobs-1-gpus": "8", "jobs-1-duration_days": "2", "jobs-1-submit_day": "3"}
    data.update(extra)
    return data


def test_builder_creates_a_plan_from_fleets_and_workloads(world: dict[str, Any], client_for: Any) -> None:
    from planning.models import CapacityPlan

    client = client_for(world["users"]["planner"])
    assert client.get("/capacity/new/").status_code == 200
    r = client.post("/capacity/new/", _post(world))
    assert r.status_code == 302, r.content.decode()[:3000]
    plan = CapacityPlan.objects.get(name="Built")
    fleet = world["x"]["fleet"]
    assert plan.cluster_fleets == {fleet.name: fleet.pk} and plan.watched and plan.catalog_id is None
    assert plan.document["clusters"][0]["name"] == fleet.name
    jobs = {j["name"]: j for j in plan.document["jobs"]}
    assert jobs["pretrain"]["workload"]["model"] == world["x"]["workload"].model
    assert jobs["pretrain"]["gpus"] == 32 and jobs["eval"]["duration_days"] == 2.0
    page = client.get(f"/capacity/{plan.pk}/edit/").content.decode()
    assert 'value="pretrain"' in page and "checked" in page  # the workload row and the ticked fleet round-trip
    # saving the edit page keeps the document; the team's catalog can be picked (another team's is no choice)
    r = client.post(f"/capacity/{plan.pk}/edit/", _post(world, name="Built", catalog=str(world["x"]["catalog"].pk)))
    assert r.status_code == 302
    plan.refresh_from_db()
    assert plan.catalog_id == world["x"]["catalog"].pk
    r = client.post(f"/capacity/{plan.pk}/edit/", _post(world, catalog=str(world["y"]["catalog"].pk)))
    assert r.status_code == 400 and "Select a valid choice" in r.content.decode()
    assert {j["name"] for j in plan.document["jobs"]} == {"pretrain", "eval"}


def test_builder_errors_are_inline_and_nothing_is_written(world: dict[str, Any], client_for: Any) -> None:
    from planning.models import CapacityPlan

    client = client_for(world["users"]["planner"])
    r = client.post("/capacity/new/", _post(world, **{"jobs-1-gpus": "4096"}))
    assert r.status_code == 400 and "exceeds the largest cluster" in r.content.decode()
    r = client.post("/capacity/new/", _post(world, arrivals="[not json"))
    assert r.status_code == 400 and "not valid JSON" in r.content.decode()
    assert not CapacityPlan.objects.filter(name="Built").exists()


def test_demand_csv_replaces_jobs_all_or_nothing(world: dict[str, Any], client_for: Any) -> None:
    from planning.models import CapacityPlan

    client = client_for(world["users"]["planner"])
    wl = world["x"]["workload"].name
    good = f"name,gpus,workload,submit_day,deadline_day\nfrom-csv,32,{wl},1,55\n".encode()
    r = client.post("/capacity/new/", {**_post(world), "demand_csv": SimpleUploadedFile("d.csv", good, "text/csv")})
    assert r.status_code == 302
    plan = CapacityPlan.objects.get(name="Built")
    assert [j["name"] for j in plan.document["jobs"]] == ["from-csv"]
    bad = b"name,gpus,duration_days\nx,lots,2\n"
    r = client.post("/capacity/new/", {**_post(world, name="Other"),
                                       "demand_csv": SimpleUploadedFile("d.csv", bad, "text/csv")})
    assert r.status_code == 400 and "line 2" in r.content.decode()
    assert not CapacityPlan.objects.filter(name="Other").exists()  # the plan is not half-written


def test_builder_permissions_and_other_teams(world: dict[str, Any], client_for: Any) -> None:
    from planning.services.capacity_plans import capacity_plan_create

    plan = capacity_plan_create(team=world["other_team"], user=world["other_admin"], name="Theirs",
                                document={"horizon_days": 10, "clusters": [{"name": "c", "gpu": "H100-SXM",
                                                                            "gpus": 8}]})
    client = client_for(world["users"]["planner"])
    assert client.get(f"/capacity/{plan.pk}/edit/").status_code == 404
    assert client.get(f"/capacity/compare/?plans={plan.pk},{plan.pk}").status_code == 404
    viewer = client_for(world["users"]["viewer"])
    assert viewer.get("/capacity/new/").status_code == 403
    nav = client.get("/fleets/").content.decode()  # the main navigation links the plans
    assert '<a href="/capacity/" >Capacity plans</a>' in nav
    assert 'href="/capacity/" aria-current="page">Capacity plans' in client.get("/capacity/new/").content.decode()


def test_compare_page_shows_both_plans(world: dict[str, Any], client_for: Any) -> None:
    from planning.services.capacity_plans import capacity_plan_create
    from simulations import services
    from simulations.services.capacity_plans import capacity_plan_submit

    doc = {"horizon_days": 30, "failures": False, "clusters": [{"name": "c", "gpu": "H100-SXM", "gpus": 16}],
           "arrivals": [{"name": "r", "rate_per_day": 2, "gpus": 8, "duration_days": 2}]}
    big = {**doc, "clusters": [{"name": "c", "gpu": "H100-SXM", "gpus": 64}]}
    plans = [capacity_plan_create(team=world["team"], user=None, name=n, document=d)
             for n, d in (("Small", doc), ("Large", big))]
    client = client_for(world["users"]["viewer"])
    r = client.get(f"/capacity/compare/?plan={plans[0].pk}&plan={plans[1].pk}")
    assert r.status_code == 200 and "has no finished run" in r.content.decode()
    for p in plans:
        run = capacity_plan_submit(plan=p, user=None, params={"replications": 2})
        assert services.run_execute(run_id=run.pk).status == "succeeded"
    page = client.get(f"/capacity/compare/?plan={plans[0].pk}&plan={plans[1].pk}").content.decode()
    assert 'id="plan-compare"' in page and "Small" in page and "Large" in page
    assert "Utilization (allocated)" in page and "First shortfall day" in page and "best" in page
    # each P50 shows its P10-P90 band over the replications
    assert page.count('class="small muted band">P10–P90') >= 2
