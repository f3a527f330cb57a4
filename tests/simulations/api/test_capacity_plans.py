"""Capacity plans (issue #14) on the platform: team-owned and change-logged, validated by the engine's plan
parser, run as the ``fleet`` run kind through the same claim / progress / cancel / idempotency machinery,
and the quarterly table exported as CSV / XLSX / JSON."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest

pytestmark = pytest.mark.django_db

PLAN: dict[str, Any] = {
    "horizon_days": 60, "failures": False, "replications": 3,
    "clusters": [{"name": "h100", "gpu": "H100-SXM", "gpus": 64}],
    "jobs": [{"name": "first", "gpus": 64, "duration_days": 10, "submit_day": 0, "deadline_day": 12},
             {"name": "second", "gpus": 64, "duration_days": 10, "submit_day": 0, "deadline_day": 12}],
    "arrivals": [{"name": "exp", "rate_per_day": 2, "gpus": 8, "duration_days": {"dist": "exponential", "mean": 1}}],
    "candidates": [{"name": "H100 now", "gpu": "H100-SXM", "gpus": 64, "in_service_day": 0}],
}


@pytest.fixture
def plan(world: dict[str, Any]) -> Any:
    from planning.services.capacity_plans import capacity_plan_create

    return capacity_plan_create(team=world["team"], user=world["users"]["planner"], name="Next year",
                                document=copy.deepcopy(PLAN))


def test_crud_over_the_api_is_change_logged_and_validated(world: dict[str, Any], api_client_for: Any) -> None:
    from planning.models import ObjectChange

    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/capacity-plans/", {"name": "P", "document": PLAN}, format="json")
    assert r.status_code == 201, r.content
    pk = r.json()["id"]
    bad = copy.deepcopy(PLAN)
    bad["clusters"][0]["gpus"] = -8
    r = client.patch(f"/api/v1/capacity-plans/{pk}/", {"document": bad}, format="json")
    assert r.status_code == 400
    assert "document.clusters[0].gpus" in r.json()["errors"]
    r = client.patch(f"/api/v1/capacity-plans/{pk}/", {"description": "with a note"}, format="json")
    assert r.status_code == 200
    actions = list(ObjectChange.objects.filter(object_type="capacity_plan", object_id=pk)
                   .order_by("id").values_list("action", flat=True))
    assert actions == ["create", "update"]
    r = client.post("/api/v1/capacity-plans/", {"name": "x", "document": {"horizon_days": 0, "clusters": []}}, format="json")
    assert r.status_code == 400 and "document.horizon_days" in r.json()["errors"]


def test_other_teams_and_viewers(world: dict[str, Any], plan: Any, api_client_for: Any) -> None:
    outsider = api_client_for(world["other_admin"])
    assert outsider.get(f"/api/v1/capacity-plans/{plan.pk}/").status_code == 404
    assert outsider.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {}, format="json").status_code == 404
    assert outsider.get(f"/api/v1/capacity-plans/{plan.pk}/quarters/").status_code == 404
    assert plan.pk not in [p["id"] for p in outsider.get("/api/v1/capacity-plans/").json()["results"]]
    viewer = api_client_for(world["users"]["viewer"])
    assert viewer.get(f"/api/v1/capacity-plans/{plan.pk}/").status_code == 200
    assert viewer.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {}, format="json").status_code == 403


def test_run_end_to_end_with_progress_reuse_and_quarters(world: dict[str, Any], plan: Any,
                                                         api_client_for: Any) -> None:
    from simulations import services

    client = api_client_for(world["users"]["planner"])
    r = client.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {"params": {"replications": 2, "seed": 5}},
                    format="json")
    assert r.status_code == 202, r.content
    run_id = r.json()["id"]
    assert r.json()["kind"] == "fleet"
    done = services.run_execute(run_id=run_id)
    assert done.status == "succeeded", done.error
    res = done.result
    assert res["summary"]["replications"] == 2 and res["first"]["seed"] == 5
    assert res["summary"]["deadlines_missed"]["p50"] == 1.0
    assert res["purchase"]["recommendation"]["option"] == "H100 now"
    assert done.progress == 100
    # an identical submission answers the stored run
    again = client.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {"params": {"replications": 2, "seed": 5}},
                        format="json")
    assert again.status_code == 200 and again.json()["id"] == run_id and again.json()["reused"] is True
    assert [x["id"] for x in client.get(f"/api/v1/capacity-plans/{plan.pk}/runs/").json()] == [run_id]
    r = client.get(f"/api/v1/capacity-plans/{plan.pk}/quarters/?fmt=json")
    assert r.status_code == 200
    body = r.json()
    assert body["run"] == run_id and body["rows"][0]["quarter"] == 1
    *quarters, total = body["rows"]
    assert total["quarter"] == "total" and all(isinstance(q["quarter"], int) for q in quarters)
    delivered = sum(row["gpu_hours_delivered"] for row in quarters)
    assert delivered == pytest.approx(res["first"]["gpu_hours"]["productive"])
    assert total["gpu_hours_delivered"] == pytest.approx(delivered, rel=1e-12)
    # money in exact cents: the total row is the sum of the quarters' cents, the TCO the run's cost in the horizon
    for key in ("capex_usd", "opex_usd", "tco_usd"):
        assert all(round(q[key], 2) == q[key] for q in body["rows"]), key
        assert round(total[key] * 100) == sum(round(q[key] * 100) for q in quarters), key
    assert total["tco_usd"] == res["first"]["costs"]["horizon_cost_usd"]
    csv = client.get(f"/api/v1/capacity-plans/{plan.pk}/quarters/?fmt=csv")
    assert csv.status_code == 200 and csv.content.decode().startswith("quarter,start_day,end_day,gpu_hours_demanded")
    xlsx = client.get(f"/api/v1/capacity-plans/{plan.pk}/quarters/?fmt=xlsx")
    import openpyxl

    wb = openpyxl.load_workbook(io.BytesIO(xlsx.content))
    assert wb.sheetnames[0] == "Quarters"
    assert client.get(f"/api/v1/capacity-plans/{plan.pk}/quarters/?fmt=pdf").status_code == 400
    assert client.get(f"/api/v1/capacity-plans/{plan.pk}/quarters/?run=abc").status_code == 400


def test_bad_params_and_cancel(world: dict[str, Any], plan: Any, api_client_for: Any, monkeypatch: Any) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    client = api_client_for(world["users"]["planner"])
    for params, field in (({"replications": 0}, "params.replications"), ({"bogus": 1}, "params.bogus"),
                          ({"search": "yes"}, "params.search"), ({"replications": 1e9}, "params.replications")):
        r = client.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {"params": params}, format="json")
        assert r.status_code == 400 and field in r.json()["errors"], (params, r.content)
    seen: list[str] = []
    real = services.execution.compute

    def cancelling(*args: Any, **kwargs: Any) -> Any:
        outer = kwargs["progress"]

        def progress(done: int, total: int) -> None:
            outer(done, total)
            row = SimulationRun.objects.get(status="running")
            seen.append(row.progress_message)
            SimulationRun.objects.filter(pk=row.pk).update(status="cancelled", cancel_requested=True)

        return real(*args, **{**kwargs, "progress": progress})

    monkeypatch.setattr(services.execution, "compute", cancelling)
    r = client.post(f"/api/v1/capacity-plans/{plan.pk}/run/", {"params": {"replications": 5, "search": False}},
                    format="json")
    done = services.run_execute(run_id=r.json()["id"])
    assert seen == ["replications 1/5"]
    assert done.status == "cancelled" and done.result is None


def test_replications_fan_out_as_one_sweep_of_runs_and_merge_exactly(world: dict[str, Any], plan: Any,
                                                                     api_client_for: Any) -> None:
    from engine.fleet.core import simulate_replications
    from simulations import services
    from simulations.models import SimulationRun, Sweep

    client = api_client_for(world["users"]["planner"])
    r = client.post(f"/api/v1/capacity-plans/{plan.pk}/replicate/", {"replications": 5, "seed": 3, "chunk": 2},
                    format="json")
    assert r.status_code == 202, r.content
    sweep = Sweep.objects.get(pk=r.json()["sweep"])
    children = list(SimulationRun.objects.filter(sweep=sweep).order_by("pk"))
    assert [c.params for c in children] == [{"seed": 3, "replications": 2, "search": False},
                                            {"seed": 5, "replications": 2, "search": False},
                                            {"seed": 7, "replications": 1, "search": False}]
    assert all(c.kind == "fleet" and c.trigger == "sweep" for c in children)
    pending = client.get(f"/api/v1/capacity-plans/{plan.pk}/replications/?sweep={sweep.pk}").json()
    assert pending["summary"] is None and pending["runs"] == 3 and pending["runs_finished"] == 0
    for c in children:
        assert services.run_execute(run_id=c.pk).status == "succeeded"
    body = client.get(f"/api/v1/capacity-plans/{plan.pk}/replications/").json()
    assert body["sweep"] == sweep.pk and body["replications_done"] == 5 and body["progress"] == 100
    sweep.refresh_from_db()
    assert sweep.status == "succeeded"
    # the merge over the workers' chunks equals one process simulating the same seeds
    alone = simulate_replications(copy.deepcopy(PLAN), 5, 3)["summary"]
    merged = body["summary"]
    for key in ("utilization", "deadlines_missed", "jobs_completed", "first_shortfall_day"):
        assert merged[key] == alone[key], key
    assert len(merged["weekly"]["h100"]["allocated"]["p50"]) == 9
    bad = client.post(f"/api/v1/capacity-plans/{plan.pk}/replicate/", {"replications": 1001}, format="json")
    assert bad.status_code == 400 and "replications" in bad.json()["errors"]
    viewer = api_client_for(world["users"]["viewer"])
    assert viewer.post(f"/api/v1/capacity-plans/{plan.pk}/replicate/", {"replications": 2},
                       format="json").status_code == 403


def test_demand_plan_csv_import_uses_the_teams_workloads(world: dict[str, Any], plan: Any,
                                                         api_client_for: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from planning.models import ObjectChange

    client = api_client_for(world["users"]["planner"])
    wl = world["x"]["workload"].name
    csv = ("name,team,gpus,duration_days,workload,submit_day,deadline_day,priority\n"
           f"pretrain,research,32,,{wl},5,50,3\n"
           "evals,research,8,2,,1,,0\n")
    r = client.post(f"/api/v1/capacity-plans/{plan.pk}/import-jobs/",
                    {"file": SimpleUploadedFile("demand.csv", csv.encode(), content_type="text/csv")},
                    format="multipart")
    assert r.status_code == 200, r.content
    jobs = r.json()["document"]["jobs"]
    assert [j["name"] for j in jobs] == ["pretrain", "evals"]
    assert jobs[0]["workload"]["model"] == world["x"]["workload"].model and jobs[0]["gpus"] == 32
    assert jobs[1] == {"name": "evals", "team": "research", "gpus": 8, "duration_days": 2.0, "submit_day": 1.0,
                       "priority": 0}
    assert ObjectChange.objects.filter(object_type="capacity_plan", object_id=plan.pk, action="update").exists()
    bad = ("name,gpus,duration_days,submit_day\nx,eight,1,0\ny,8,1,0\n")
    r = client.post(f"/api/v1/capacity-plans/{plan.pk}/import-jobs/",
                    {"file": SimpleUploadedFile("d.csv", bad.encode(), content_type="text/csv")}, format="multipart")
    assert r.status_code == 400 and any(k.startswith("rows.2") for k in r.json()["errors"]), r.content
    other = ("name,gpus,duration_days,submit_day,workload\nx,8,,0,nope\n")
    r = client.post(f"/api/v1/capacity-plans/{plan.pk}/import-jobs/",
                    {"file": SimpleUploadedFile("d.csv", other.encode(), content_type="text/csv")}, format="multipart")
    assert r.status_code == 400 and "no workload of this team" in r.content.decode()
    # a job the engine refuses is a field error in the document, nothing is saved
    huge = "name,gpus,duration_days,submit_day\nx,100000,1,0\n"
    r = client.post(f"/api/v1/capacity-plans/{plan.pk}/import-jobs/",
                    {"file": SimpleUploadedFile("d.csv", huge.encode(), content_type="text/csv")}, format="multipart")
    assert r.status_code == 400 and "document.jobs[0].gpus" in r.json()["errors"]
    plan.refresh_from_db()
    assert [j["name"] for j in plan.document["jobs"]] == ["pretrain", "evals"]
