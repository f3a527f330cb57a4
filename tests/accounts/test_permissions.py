"""Team scoping and roles on every planning/simulation endpoint.

A user of team X gets 404 for every team Y object (read, write and actions); roles decide writes:
viewer reads, finance reads + exports, planner creates/runs, admin also edits catalogs.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def y_objects(world: dict[str, Any], finished_run: Any) -> dict[str, Any]:
    from simulations import services
    from simulations.models import ReEvaluation

    y = world["y"]
    admin = world["other_admin"]
    run = finished_run(y["scenario"], admin)
    run2 = finished_run(y["fleet_scenario"], admin)
    sweep = services.sweep_submit(scenario=y["scenario"], axes={"cluster.nic_gbps": [200, 400]}, user=admin)
    report = services.report_create(team=world["other_team"], user=admin, name="Y report", runs=[run, run2],
                                    baseline=run)
    reeval = ReEvaluation.objects.create(team=world["other_team"], scenario=y["scenario"], new_run=run,
                                         idempotency_key="k-y")
    version = y["catalog"].latest_version()
    return {**y, "run": run, "run2": run2, "sweep": sweep, "report": report, "reeval": reeval,
            "version": version, "item": version.items.first()}


def _detail_urls(o: dict[str, Any]) -> list[str]:
    return [
        f"/api/v1/fleets/{o['fleet'].pk}/",
        f"/api/v1/workloads/{o['workload'].pk}/",
        f"/api/v1/scenarios/{o['scenario'].pk}/",
        f"/api/v1/scenarios/{o['scenario'].pk}/document/",
        f"/api/v1/catalogs/{o['catalog'].pk}/",
        f"/api/v1/catalogs/{o['catalog'].pk}/versions/",
        f"/api/v1/catalog-versions/{o['version'].pk}/",
        f"/api/v1/catalog-versions/{o['version'].pk}/items/",
        f"/api/v1/catalog-items/{o['item'].pk}/",
        f"/api/v1/runs/{o['run'].pk}/",
        f"/api/v1/runs/{o['run'].pk}/result/",
        f"/api/v1/runs/{o['run'].pk}/export/?fmt=csv",
        f"/api/v1/sweeps/{o['sweep'].pk}/",
        f"/api/v1/reports/{o['report'].pk}/",
        f"/api/v1/reports/{o['report'].pk}/table/",
        f"/api/v1/reports/{o['report'].pk}/export/?fmt=csv",
        f"/api/v1/reevaluations/{o['reeval'].pk}/",
    ]


def test_other_teams_objects_are_404_for_read(world, y_objects, api_client_for) -> None:
    client = api_client_for(world["users"]["admin"])
    for url in _detail_urls(y_objects):
        response = client.get(url)
        assert response.status_code == 404, (url, response.status_code, response.content[:200])
        assert response.json()["status"] == 404


def test_other_teams_objects_are_404_for_writes_and_actions(world, y_objects, api_client_for) -> None:
    client = api_client_for(world["users"]["admin"])
    o = y_objects
    writes = [
        ("patch", f"/api/v1/fleets/{o['fleet'].pk}/", {"name": "x"}),
        ("delete", f"/api/v1/fleets/{o['fleet'].pk}/", None),
        ("patch", f"/api/v1/workloads/{o['workload'].pk}/", {"name": "x"}),
        ("patch", f"/api/v1/scenarios/{o['scenario'].pk}/", {"name": "x"}),
        ("delete", f"/api/v1/scenarios/{o['scenario'].pk}/", None),
        ("post", f"/api/v1/scenarios/{o['scenario'].pk}/run/", {"kind": "predict"}),
        ("post", f"/api/v1/scenarios/{o['scenario'].pk}/sweep/", {"axes": {"cluster.nic_gbps": [200]}}),
        ("patch", f"/api/v1/catalogs/{o['catalog'].pk}/", {"name": "x"}),
        ("post", f"/api/v1/catalogs/{o['catalog'].pk}/fork/", {}),
        ("delete", f"/api/v1/catalog-versions/{o['version'].pk}/", None),
        ("patch", f"/api/v1/catalog-items/{o['item'].pk}/", {"unit_price_usd": 1}),
        ("delete", f"/api/v1/catalog-items/{o['item'].pk}/", None),
        ("post", f"/api/v1/runs/{o['run'].pk}/cancel/", {}),
        ("post", f"/api/v1/sweeps/{o['sweep'].pk}/cancel/", {}),
        ("patch", f"/api/v1/reports/{o['report'].pk}/", {"name": "x"}),
        ("delete", f"/api/v1/reports/{o['report'].pk}/", None),
    ]
    for method, url, body in writes:
        response = getattr(client, method)(url, body, format="json")
        assert response.status_code == 404, (method, url, response.status_code, response.content[:200])


def test_other_teams_objects_cannot_be_referenced(world, y_objects, api_client_for) -> None:
    client = api_client_for(world["users"]["admin"])
    o = y_objects
    x = world["x"]
    r = client.post("/api/v1/runs/", {"scenario": o["scenario"].pk}, format="json")
    assert r.status_code == 400 and "scenario" in r.json()["errors"]
    r = client.post("/api/v1/scenarios/", {"name": "s", "workload": o["workload"].pk, "cluster": {"gpus": 8}},
                    format="json")
    assert r.status_code == 400 and "workload" in r.json()["errors"]
    r = client.patch(f"/api/v1/scenarios/{x['scenario'].pk}/", {"catalog": o["catalog"].pk}, format="json")
    assert r.status_code == 400 and "catalog" in r.json()["errors"]
    r = client.get(f"/api/v1/reports/compare/?runs={o['run'].pk}")
    assert r.status_code == 400 and "runs" in r.json()["errors"]
    r = client.post("/api/v1/reports/", {"name": "r", "runs": [o["run"].pk]}, format="json")
    assert r.status_code == 400 and "runs" in r.json()["errors"]
    r = client.post("/api/v1/preview/", {"scenario": o["scenario"].pk}, format="json")
    assert r.status_code == 400 and "scenario" in r.json()["errors"]


def test_lists_only_show_own_team_and_global(world, y_objects, api_client_for) -> None:
    client = api_client_for(world["users"]["viewer"])
    for url in ("/api/v1/fleets/", "/api/v1/workloads/", "/api/v1/scenarios/", "/api/v1/runs/",
                "/api/v1/sweeps/", "/api/v1/reports/", "/api/v1/reevaluations/"):
        body = client.get(url).json()
        assert all(row.get("team") in (None, "team-x") for row in body["results"] if "team" in row), url
    catalogs = client.get("/api/v1/catalogs/").json()["results"]
    assert {c["team"] for c in catalogs} == {None, "team-x"}
    changes = client.get("/api/v1/changes/?object_type=scenario").json()["results"]
    assert changes and all(c["object_id"] != y_objects["scenario"].pk for c in changes)


def test_token_is_confined_to_its_team(world, y_objects, make_user, token_client_for) -> None:
    from accounts.models import Membership

    user = world["users"]["planner"]
    Membership.objects.create(user=user, team=world["other_team"], role="planner")
    client, _ = token_client_for(user, world["team"])
    assert client.get(f"/api/v1/scenarios/{y_objects['scenario'].pk}/").status_code == 404
    assert client.get(f"/api/v1/scenarios/{world['x']['scenario'].pk}/").status_code == 200


# --- roles ------------------------------------------------------------------------------------------
def test_viewer_reads_but_cannot_write(world, api_client_for) -> None:
    client = api_client_for(world["users"]["viewer"])
    x = world["x"]
    assert client.get(f"/api/v1/scenarios/{x['scenario'].pk}/").status_code == 200
    assert client.post("/api/v1/fleets/", {"name": "f", "server_model": "HGX-H100", "server_count": 1},
                       format="json").status_code == 403
    assert client.patch(f"/api/v1/scenarios/{x['scenario'].pk}/", {"name": "n"}, format="json").status_code == 403
    assert client.post(f"/api/v1/scenarios/{x['scenario'].pk}/run/", {}, format="json").status_code == 403
    assert client.delete(f"/api/v1/workloads/{x['workload'].pk}/").status_code == 403


def test_finance_exports_but_cannot_run(world, api_client_for, finished_run) -> None:
    x = world["x"]
    run = finished_run(x["scenario"], world["users"]["planner"])
    client = api_client_for(world["users"]["finance"])
    assert client.post(f"/api/v1/scenarios/{x['scenario'].pk}/run/", {}, format="json").status_code == 403
    assert client.post("/api/v1/runs/", {"scenario": x["scenario"].pk}, format="json").status_code == 403
    r = client.get(f"/api/v1/runs/{run.pk}/export/?fmt=csv")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    r = client.get(f"/api/v1/reports/compare/?runs={run.pk}&fmt=xlsx")
    assert r.status_code == 200
    viewer = api_client_for(world["users"]["viewer"])
    assert viewer.get(f"/api/v1/runs/{run.pk}/export/?fmt=csv").status_code == 403
    assert viewer.get(f"/api/v1/reports/compare/?runs={run.pk}&fmt=csv").status_code == 403
    assert viewer.get(f"/api/v1/reports/compare/?runs={run.pk}").status_code == 200


def test_planner_runs_but_cannot_edit_catalogs(world, api_client_for, fake_engine) -> None:
    x = world["x"]
    client = api_client_for(world["users"]["planner"])
    r = client.post(f"/api/v1/scenarios/{x['scenario'].pk}/run/", {"kind": "predict"}, format="json")
    assert r.status_code == 202, r.content
    assert r["Location"].endswith(f"/api/v1/runs/{r.json()['id']}/")
    item = x["catalog"].latest_version().items.first()
    assert client.patch(f"/api/v1/catalog-items/{item.pk}/", {"unit_price_usd": 1}, format="json").status_code == 403
    assert client.post("/api/v1/catalogs/", {"name": "mine"}, format="json").status_code == 403


def test_admin_edits_team_catalog_but_never_the_global_one(world, default_catalog, api_client_for) -> None:
    client = api_client_for(world["users"]["admin"])
    item = world["x"]["catalog"].latest_version().items.first()
    assert client.patch(f"/api/v1/catalog-items/{item.pk}/", {"unit_price_usd": 1}, format="json").status_code == 201
    global_item = default_catalog.latest_version().items.first()
    assert client.get(f"/api/v1/catalog-items/{global_item.pk}/").status_code == 200
    assert client.patch(f"/api/v1/catalog-items/{global_item.pk}/", {"unit_price_usd": 1},
                        format="json").status_code == 403
    assert client.patch(f"/api/v1/catalogs/{default_catalog.pk}/", {"name": "x"}, format="json").status_code == 403
    assert client.delete(f"/api/v1/catalogs/{default_catalog.pk}/").status_code == 403
    r = client.post("/api/v1/catalog-items/", {"catalog": default_catalog.pk, "key": "k", "kind": "gpu"},
                    format="json")
    assert r.status_code == 403
    # Anyone who may edit catalogs can fork the global one into their team.
    r = client.post(f"/api/v1/catalogs/{default_catalog.pk}/fork/", {"name": "Our prices"}, format="json")
    assert r.status_code == 201 and r.json()["team"] == "team-x" and r.json()["forked_from"] == default_catalog.pk


def test_unauthenticated_is_rejected(client, world) -> None:
    for url in ("/api/v1/scenarios/", "/api/v1/runs/", "/api/v1/reports/compare?runs=1"):
        assert client.get(url).status_code in (401, 403)
    assert client.post("/api/v1/preview/", {}, content_type="application/json").status_code in (401, 403)
