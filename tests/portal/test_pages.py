"""Portal pages through the Django test client: rendering, inline form errors, permissions, scoping."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST

pytestmark = pytest.mark.django_db


def login(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client


# --- sign-in, layout ---------------------------------------------------------------------------------------
def test_login_page_renders_and_signs_in(client: Any, make_user: Any) -> None:
    user = make_user("planner")
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert b"Sign in" in page.content
    bad = client.post(reverse("login"), {"username": user.username, "password": "nope"})
    assert bad.status_code == 200 and b"alert-error" in bad.content
    ok = client.post(reverse("login"), {"username": user.username, "password": "pw-" + user.username})
    assert ok.status_code == 302 and ok["Location"] == "/"


def test_pages_require_login(client: Any) -> None:
    for name in ("dashboard", "catalog", "fleets", "scenarios", "runs", "compare", "reevaluations"):
        r = client.get(reverse(name))
        assert r.status_code == 302 and "/accounts/login/" in r["Location"], name


def test_csp_header_and_no_inline_script(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    for name in ("dashboard", "catalog", "scenario-new", "runs", "compare"):
        r = client.get(reverse(name))
        assert r.status_code == 200, name
        assert "script-src 'self'" in r["Content-Security-Policy"]
        html = r.content.decode()
        # every <script> either has src= or is a JSON data block
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in tag or 'type="application/json"' in tag, (name, tag)
        assert not re.search(r"\son[a-z]+=", html), name


def test_team_switcher_lists_memberships(client: Any, make_user: Any, team: Any, other_team: Any) -> None:
    from accounts.models import Membership

    user = make_user("planner", team=team)
    Membership.objects.create(user=user, team=other_team, role="viewer")
    login(client, user)
    html = client.get(reverse("dashboard")).content.decode()
    assert 'name="team"' in html and "Team X · Planner" in html and "Team Y · Viewer" in html
    r = client.post(reverse("switch-team"), {"team": other_team.pk, "next": "/fleets/"})
    assert r.status_code == 302 and r["Location"] == "/fleets/"
    # the viewer team is now active: creating a fleet there is not allowed
    assert client.get(reverse("fleets")).status_code == 200


def test_dashboard_empty_states(client: Any, make_user: Any) -> None:
    login(client, make_user("planner"))
    html = client.get(reverse("dashboard")).content.decode()
    assert "No runs yet" in html and "Nothing watched" in html and "No fleets" in html
    assert reverse("scenario-new") in html


def test_dashboard_viewer_has_no_create_buttons(client: Any, make_user: Any) -> None:
    login(client, make_user("viewer"))
    html = client.get(reverse("dashboard")).content.decode()
    assert 'href="/scenarios/new/"' not in html and 'href="/fleets/new/"' not in html


# --- catalog -----------------------------------------------------------------------------------------------
def test_catalog_filter_and_sort(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("viewer"))
    r = client.get(reverse("catalog"))
    html = r.content.decode()
    assert r.status_code == 200 and "H100-SXM" in html and "Version history" in html
    r = client.get(reverse("catalog"), {"kind": "gpu", "q": "B200"})
    html = r.content.decode().split('id="catalog-table"')[1].split("</table>")[0]
    assert "B200" in html and "A100-40GB" not in html
    r = client.get(reverse("catalog"), {"kind": "gpu", "sort": "-unit_price_usd"})
    prices = [float(p.replace(",", "")) for p in re.findall(r'<td class="num">\$([\d,]+)</td>', r.content.decode())]
    assert prices and prices == sorted(prices, reverse=True)
    r = client.get(reverse("catalog"), {"kind": "switch"})
    assert "QM9700" in r.content.decode()


def test_catalog_version_history_shows_changes(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    from planning import services

    admin = make_user("admin", team=team)
    fork = services.catalog_fork(catalog=catalog.catalog, team=team, user=admin)
    item = fork.latest_version().items.get(key="H100-SXM")
    services.catalog_item_update(item=item, user=admin, data={"unit_price_usd": 22222.0}, note="H100 price cut")
    login(client, admin)
    html = client.get(reverse("catalog"), {"catalog": fork.pk}).content.decode()
    assert "H100 price cut" in html and "22222" in html and "unit_price_usd" in html


def test_catalog_fork_needs_catalog_capability(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    assert client.post(reverse("catalog-fork", args=[catalog.catalog_id])).status_code == 403


# --- fleets ------------------------------------------------------------------------------------------------
FLEET = {"name": "Ashburn", "site": "IAD", "server_model": "HGX-H100", "server_count": 16, "gpus_per_node": 8,
         "nics_per_node": 8, "nic_gbps": 400, "fabric": "infiniband", "topology": "fat-tree",
         "oversubscription": 1.0, "in_service_date": "", "notes": ""}


def test_fleet_create_and_edit(client: Any, make_user: Any, catalog: Any) -> None:
    from planning.models import Fleet

    user = make_user("planner")
    login(client, user)
    assert client.get(reverse("fleet-new")).status_code == 200
    r = client.post(reverse("fleet-new"), FLEET)
    assert r.status_code == 302
    fleet = Fleet.objects.get(name="Ashburn")
    assert fleet.team_id == user.test_team.pk and fleet.gpus == 128
    r = client.post(reverse("fleet-edit", args=[fleet.pk]), {**FLEET, "server_count": 32})
    assert r.status_code == 302
    fleet.refresh_from_db()
    assert fleet.server_count == 32
    assert "Ashburn" in client.get(reverse("fleets")).content.decode()


def test_fleet_form_errors_inline_and_input_kept(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("fleet-new"), {**FLEET, "name": "Kept name", "server_count": 0, "oversubscription": 0.5})
    assert r.status_code == 400
    html = r.content.decode()
    assert 'id="id_server_count-error"' in html or "id_server_count" in html
    assert html.count('class="field-error"') >= 2
    assert 'value="Kept name"' in html


def test_viewer_cannot_create_or_edit_fleet(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    from planning import services

    planner = make_user("planner", team=team)
    fleet = services.fleet_create(team=team, user=planner, **{k: v for k, v in FLEET.items() if v != ""})
    login(client, make_user("viewer", team=team))
    assert client.get(reverse("fleet-new")).status_code == 403
    assert client.post(reverse("fleet-new"), FLEET).status_code == 403
    assert client.get(reverse("fleet-edit", args=[fleet.pk])).status_code == 403
    assert client.post(reverse("fleet-edit", args=[fleet.pk]), FLEET).status_code == 403
    assert "Edit</a>" not in client.get(reverse("fleets")).content.decode()


def test_other_team_fleet_is_404(client: Any, make_user: Any, team: Any, other_team: Any, catalog: Any) -> None:
    from planning import services

    owner = make_user("planner", team=other_team)
    fleet = services.fleet_create(team=other_team, user=owner, **{k: v for k, v in FLEET.items() if v != ""})
    login(client, make_user("admin", team=team))
    assert client.get(reverse("fleet-edit", args=[fleet.pk])).status_code == 404
    assert "Ashburn" not in client.get(reverse("fleets")).content.decode()


# --- scenario builder --------------------------------------------------------------------------------------
def test_builder_creates_scenario(client: Any, make_user: Any, catalog: Any) -> None:
    from planning.models import Scenario

    user = make_user("planner")
    login(client, user)
    page = client.get(reverse("scenario-new"))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="workload-presets"' in html and "Live estimate" in html and 'hx-post="/scenarios/preview/"' in html
    for label in ("200G", "400G", "800G", "InfiniBand", "Ethernet (RoCE)", "Oversubscription"):
        assert label in html
    r = client.post(reverse("scenario-new"), BUILDER_POST)
    assert r.status_code == 302, r.content.decode()[:2000]
    s = Scenario.objects.get(name=BUILDER_POST["name"])
    assert s.cluster["nic_gbps"] == 400 and s.cluster["fabric"] == "infiniband"
    assert s.workload.model["heads"] == 32 and s.workload.training["tokens"] == 1e12
    assert s.costs["usd_per_kwh"] == 0.08
    detail = client.get(r["Location"])
    assert detail.status_code == 200 and "Run TCO" in detail.content.decode()
    # edit round-trip keeps the values
    edit = client.get(reverse("scenario-edit", args=[s.pk])).content.decode()
    assert 'value="Llama 8B on 256 H100"' in edit and 'value="14336"' in edit
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**BUILDER_POST, "nic_gbps": 800, "fabric": "roce"})
    assert r.status_code == 302
    s.refresh_from_db()
    assert s.cluster["nic_gbps"] == 800 and s.cluster["fabric"] == "roce"


def test_builder_engine_error_inline_and_input_kept(client: Any, make_user: Any, catalog: Any) -> None:
    from planning.models import Scenario

    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "heads": 30, "name": "Keep me"})
    assert r.status_code == 400
    html = r.content.decode()
    assert 'id="id_heads-error"' in html and "does not divide" in html
    assert 'value="Keep me"' in html and 'value="30"' in html
    assert not Scenario.objects.filter(name="Keep me").exists()
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "gpus": 100})
    assert r.status_code == 400 and 'id="id_gpus-error"' in r.content.decode()
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "", "oversubscription": 0.5})
    html = r.content.decode()
    assert 'id="id_name-error"' in html and 'id="id_oversubscription-error"' in html


def test_live_preview_partial(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-preview"), BUILDER_POST, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and 'id="est-step-time"' in html and 'id="est-mfu"' in html
    assert 'id="est-network-wait"' in html and 'id="est-run-cost"' in html and "$" in html
    r = client.post(reverse("scenario-preview"), {**BUILDER_POST, "heads": 30}, HTTP_HX_REQUEST="true")
    assert 'id="estimate-errors"' in r.content.decode() and "does not divide" in r.content.decode()


def test_viewer_cannot_build_or_run(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    login(client, make_user("viewer", team=team))
    assert client.get(reverse("scenario-new")).status_code == 403
    assert client.post(reverse("scenario-new"), BUILDER_POST).status_code == 403
    assert client.get(reverse("scenario-edit", args=[scenario.pk])).status_code == 403
    assert client.post(reverse("scenario-run", args=[scenario.pk]), {"kind": "tco"}).status_code == 403
    assert client.post(reverse("scenario-sweep", args=[scenario.pk]), {"nic_gbps": [200, 400]}).status_code == 403
    html = client.get(reverse("scenario-detail", args=[scenario.pk])).content.decode()
    assert "Run TCO" not in html and "Start sweep" not in html and "Edit</a>" not in html


def test_other_team_scenario_is_404(client: Any, make_user: Any, team: Any, other_team: Any, scenario_for: Any) -> None:
    owner = make_user("planner", team=other_team)
    scenario = scenario_for(other_team, owner)
    login(client, make_user("admin", team=team))
    for name in ("scenario-detail", "scenario-edit"):
        assert client.get(reverse(name, args=[scenario.pk])).status_code == 404
    assert client.post(reverse("scenario-run", args=[scenario.pk])).status_code == 404


# --- runs, sweeps ------------------------------------------------------------------------------------------
def test_run_submit_and_runs_page(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    from simulations.models import SimulationRun

    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    login(client, planner)
    r = client.post(reverse("scenario-run", args=[scenario.pk]), {"kind": "tco"})
    assert r.status_code == 302
    run = SimulationRun.objects.get(scenario=scenario)
    assert run.status == "queued" and r["Location"] == reverse("run-detail", args=[run.pk])
    page = client.get(reverse("runs")).content.decode()
    assert f'id="run-row-{run.pk}"' in page and 'hx-trigger="every 2s"' in page and "Cancel" in page
    partial = client.get(reverse("runs"), {"partial": "table"}, HTTP_HX_REQUEST="true")
    assert partial.content.decode().lstrip().startswith('<div id="runs-live"')
    status = client.get(reverse("run-detail", args=[run.pk]), {"partial": "status"}, HTTP_HX_REQUEST="true")
    assert 'id="run-status"' in status.content.decode()


def test_cancel_run_permissions(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    from simulations import services as sim

    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    run = sim.run_submit(scenario=scenario, user=planner, kind="tco")
    login(client, make_user("viewer", team=team))
    assert client.post(reverse("run-cancel", args=[run.pk])).status_code == 403
    assert "btn-danger" not in client.get(reverse("runs")).content.decode()
    login(client, planner)
    assert client.post(reverse("run-cancel", args=[run.pk])).status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_failed_run_shows_error(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    from simulations import services as sim
    from simulations.models import SimulationRun

    planner = make_user("planner", team=team)
    run = sim.run_submit(scenario=scenario_for(team, planner), user=planner, kind="tco")
    SimulationRun.objects.filter(pk=run.pk).update(status="failed", error="3 does not divide 64",
                                                   error_field="parallelism.tp")
    login(client, planner)
    for url in (reverse("runs"), reverse("run-detail", args=[run.pk])):
        html = client.get(url).content.decode()
        assert "parallelism.tp" in html and "3 does not divide 64" in html


def test_sweep_form_errors_and_submit(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    from simulations.models import Sweep

    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    login(client, planner)
    r = client.post(reverse("scenario-sweep", args=[scenario.pk]), {})
    assert r.status_code == 400 and "Pick at least one value" in r.content.decode()
    r = client.post(reverse("scenario-sweep", args=[scenario.pk]), {"gpus": "12x"})
    assert r.status_code == 400 and 'id="id_gpus-error"' in r.content.decode()
    r = client.post(reverse("scenario-sweep", args=[scenario.pk]),
                    {"nic_gbps": ["200", "400", "800"], "fabric": ["infiniband", "roce"]})
    assert r.status_code == 302
    sweep = Sweep.objects.get(scenario=scenario)
    assert sweep.total_runs == 6
    page = client.get(r["Location"]).content.decode()
    assert 'id="sweep-progress"' in page and "0 of 6 runs finished" in page and 'hx-trigger="every 1s"' in page
    # the network comparison planners ask for first: fabric x routing (x topology)
    r = client.post(reverse("scenario-sweep", args=[scenario.pk]),
                    {"fabric": ["roce"], "routing": ["ecmp", "ecmp-qp", "adaptive"],
                     "topology": ["fat-tree", "rail-optimized"]})
    assert r.status_code == 302
    sweep = Sweep.objects.filter(scenario=scenario).order_by("-pk").first()
    assert sweep is not None and sweep.total_runs == 6
    assert sweep.axes == {"cluster.fabric": ["roce"], "cluster.routing": ["ecmp", "ecmp-qp", "adaptive"],
                          "cluster.topology": ["fat-tree", "rail-optimized"]}
    # a routing mode the fabric's switch does not support is refused before anything is queued, on the field
    before = Sweep.objects.count()
    r = client.post(reverse("scenario-sweep", args=[scenario.pk]), {"fabric": ["infiniband"], "routing": ["ecmp-qp"]})
    assert r.status_code == 400 and Sweep.objects.count() == before
    errors = r.context["form"].errors
    assert "routing" in errors and "does not support 'ecmp-qp'" in " ".join(errors["routing"])


# --- comparison, exports -----------------------------------------------------------------------------------
def test_compare_page_table_charts_and_export(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                              finished_run: Any) -> None:
    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner)
    runs = [finished_run(scenario, planner, nic_gbps=s, fabric=f) for f in ("infiniband", "roce") for s in (200, 400)]
    login(client, planner)
    ids = ",".join(str(r.pk) for r in runs)
    r = client.get(reverse("compare"), {"runs": ids, "baseline": runs[1].pk})
    html = r.content.decode()
    assert r.status_code == 200 and 'id="compare-table"' in html and "baseline" in html
    for chart in ("chart-mfu", "chart-ttt", "chart-tco", "chart-step", "chart-tornado", "chart-mc-run"):
        assert f'id="{chart}"' in html, chart
    spec = json.loads(re.search(r'<script id="chart-mfu" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert spec["labels"] == ["200G", "400G"] and len(spec["datasets"]) == 2
    tco = json.loads(re.search(r'<script id="chart-tco" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert len(tco["labels"]) == 4 and {d["label"] for d in tco["datasets"]} >= {"GPU servers", "Network", "Power"}
    assert "Export CSV" in html and "Printable view" in html
    export = client.get(reverse("compare-export"), {"runs": ids, "baseline": runs[1].pk, "format": "csv"})
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(export.content.decode())))
    assert rows[0][0] == "metric" and any("(baseline)" in h for h in rows[0])
    assert any(row[0] == "tco.run_cost_usd" for row in rows)
    xlsx = client.get(reverse("compare-export"), {"runs": ids, "format": "xlsx"})
    assert xlsx.status_code == 200 and xlsx.content[:2] == b"PK"
    printable = client.get(reverse("compare"), {"runs": ids, "print": "1"}).content.decode()
    assert 'class="print-view"' in printable


def test_viewer_cannot_export_but_sees_report(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                              finished_run: Any) -> None:
    planner = make_user("planner", team=team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    login(client, make_user("viewer", team=team))
    html = client.get(reverse("compare"), {"runs": run.pk}).content.decode()
    assert 'id="compare-table"' in html and "Export CSV" not in html
    assert client.get(reverse("compare-export"), {"runs": run.pk, "format": "csv"}).status_code == 403
    login(client, make_user("finance", team=team))
    assert client.get(reverse("compare-export"), {"runs": run.pk, "format": "csv"}).status_code == 200


def test_compare_other_team_run_is_404(client: Any, make_user: Any, team: Any, other_team: Any,
                                       scenario_for: Any, finished_run: Any) -> None:
    owner = make_user("planner", team=other_team)
    run = finished_run(scenario_for(other_team, owner), owner, monte_carlo=0)
    login(client, make_user("admin", team=team))
    assert client.get(reverse("compare"), {"runs": run.pk}).status_code == 404
    assert client.get(reverse("compare-export"), {"runs": run.pk, "format": "csv"}).status_code == 404
    assert client.get(reverse("run-detail", args=[run.pk])).status_code == 404


def test_compare_empty_state_lists_recent_runs(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                               finished_run: Any) -> None:
    planner = make_user("planner", team=team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    login(client, planner)
    html = client.get(reverse("compare")).content.decode()
    assert "Choose runs to compare" in html and f'value="{run.pk}"' in html
    assert client.get(reverse("compare"), {"pick": [run.pk]}).status_code == 200


def test_run_detail_with_result(client: Any, make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> None:
    planner = make_user("planner", team=team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Cost line items" in html and "MFU" in html and 'id="chart-step"' in html


# --- re-evaluations ----------------------------------------------------------------------------------------
def test_reevaluations_page(client: Any, make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> None:
    from simulations.models import ReEvaluation

    planner = make_user("planner", team=team)
    login(client, planner)
    assert "No re-evaluations yet" in client.get(reverse("reevaluations")).content.decode()
    scenario = scenario_for(team, planner)
    old = finished_run(scenario, planner, monte_carlo=0, nic_gbps=200)
    new = finished_run(scenario, planner, monte_carlo=0, nic_gbps=400)
    ReEvaluation.objects.create(
        team=team, scenario=scenario, previous_run=old, new_run=new, idempotency_key="k1",
        reasons=["catalog v2"], summary="TCO -3.1%: H100 price -10%",
        changes={"tco.annual_tco_usd": {"before": 100.0, "after": 96.9, "delta": -3.1, "delta_pct": -3.1}},
    )
    html = client.get(reverse("reevaluations")).content.decode()
    assert "TCO -3.1%: H100 price -10%" in html and "Annual TCO" in html and "-3.1%" in html
