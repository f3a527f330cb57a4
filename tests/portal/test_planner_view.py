"""#15: what a planner sees — live run page, does-not-fit warnings everywhere, layout panel, dead-end advice,
tokens page, and the smaller items (formatting, exports, defaults, baselines, points, hints)."""

from __future__ import annotations

import copy
import csv
import io
import re
from typing import Any

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _login(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client


def _not_fitting(run: Any, *, null_metrics: bool = False) -> Any:
    """Make a stored TCO result say fits: false (the engine's shape), optionally with null throughput figures."""
    result = copy.deepcopy(run.result)
    perf = result["performance"]
    perf.update({"fits": False, "memory_gb_per_gpu": 765235.0, "memory_limit_gb": 38.0})
    if null_metrics:
        for key in ("step_time_s", "mfu", "tokens_per_s", "time_to_train_days"):
            perf[key] = None
    type(run).objects.filter(pk=run.pk).update(result=result)
    run.refresh_from_db()
    return run


def _first_index(html: str, *needles: str) -> int:
    found = [html.find(n) for n in needles if html.find(n) >= 0]
    return min(found) if found else -1


# --- 1. the run page updates itself ------------------------------------------------------------------------
def test_run_page_polls_one_live_block_until_terminal(client: Any, make_user: Any, team: Any,
                                                      scenario_for: Any, finished_run: Any) -> None:
    from simulations.models import RunStatus

    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner)
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, result=None, progress=40)
    _login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="run-live"' in html and "hx-trigger" in html and 'id="cancel-run"' in html
    assert 'id="run-results"' not in html

    finished_run_result = finished_run(run.scenario, planner).result
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, result=finished_run_result, progress=100)
    part = client.get(reverse("run-detail", args=[run.pk]) + "?partial=status", HTTP_HX_REQUEST="true")
    body = part.content.decode()
    assert part.status_code == 200 and body.lstrip().startswith('<div id="run-live"')
    assert "hx-trigger" not in body  # polling stops
    assert 'id="cancel-run"' not in body
    assert f"run #{run.pk} queued" not in body.lower() and 'data-status="queued"' not in body
    assert 'id="run-results"' in body and 'id="line-items"' in body and 'data-chart="chart-step"' in body
    assert 'id="layout-panel"' in body


def test_starting_a_run_does_not_leave_a_queued_message(client: Any, make_user: Any, team: Any,
                                                        scenario_for: Any, monkeypatch: Any) -> None:
    from simulations.services import dispatch

    monkeypatch.setattr(dispatch, "enqueue_runs", lambda *a, **k: None, raising=False)
    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    _login(client, planner)
    r = client.post(reverse("scenario-run", args=[scenario.pk]), {"kind": "predict"}, follow=True)
    assert r.status_code == 200
    assert "queued." not in r.content.decode()


# --- 2. does not fit, everywhere ---------------------------------------------------------------------------
@pytest.mark.parametrize("null_metrics", [False, True])
def test_not_fitting_run_warns_first_on_run_scenario_compare(client: Any, make_user: Any, team: Any,
                                                              scenario_for: Any, finished_run: Any,
                                                              null_metrics: bool) -> None:
    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    ok = finished_run(scenario, planner, monte_carlo=0, nic_gbps=800)
    bad = _not_fitting(finished_run(scenario, planner, monte_carlo=0), null_metrics=null_metrics)
    _login(client, planner)

    html = client.get(reverse("run-detail", args=[bad.pk])).content.decode()
    warn = html.find('id="fit-warning"')
    assert warn > 0 and "Does not fit in GPU memory" in html and "alert-error" in html[warn - 80: warn + 10]
    assert warn < _first_index(html, 'id="run-results"', 'id="line-items"')
    assert "765,235.0 GB per GPU" in html

    html = client.get(reverse("scenario-detail", args=[scenario.pk])).content.decode()
    assert "fit-warning" in html
    for page in ("runs", "dashboard", "scenarios"):
        assert "badge-nofit" in client.get(reverse(page)).content.decode(), page

    html = client.get(reverse("compare") + f"?runs={ok.pk},{bad.pk}").content.decode()
    assert html.count("does not fit") >= 1 and "fit-warning" in html

    csv_text = client.get(reverse("compare-export") + f"?runs={ok.pk},{bad.pk}&format=csv").content.decode()
    rows = list(csv.reader(io.StringIO(csv_text)))
    assert rows[1][0] == "fits_in_gpu_memory"
    assert rows[1][rows[0].index(next(h for h in rows[0] if h.startswith(f"#{ok.pk}")))] == "yes"
    assert rows[1][rows[0].index(next(h for h in rows[0] if h.startswith(f"#{bad.pk}")))].startswith("NO")


def test_refused_run_shows_does_not_fit(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                        finished_run: Any) -> None:
    from simulations.models import RunStatus

    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    type(run).objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED, result=None, error_field="memory",
        error="does not fit in GPU memory: 765,235 GB per GPU needed, 38 GB usable on A100-40GB")
    _login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="fit-warning"' in html and "765,235 GB" in html


def test_not_fitting_run_is_never_best_of_a_sweep(make_user: Any, team: Any, scenario_for: Any,
                                                  finished_run: Any) -> None:
    from simulations.models import Sweep
    from simulations.services import sweep_refresh

    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    sweep = Sweep.objects.create(team=team, scenario=scenario, axes={"cluster.nic_gbps": [200, 800]}, total_runs=2)
    slow = finished_run(scenario, planner, monte_carlo=0, nic_gbps=200)
    fast = finished_run(scenario, planner, monte_carlo=0, nic_gbps=800)
    type(slow).objects.filter(pk__in=[slow.pk, fast.pk]).update(sweep=sweep)
    fast = _not_fitting(fast)
    summary = sweep_refresh(sweep_id=sweep.pk).summary
    assert summary is not None and summary["best"], summary
    assert all(b["run"] == slow.pk for b in summary["best"].values()), summary["best"]
    assert fast.pk in summary["not_fitting"]


# --- 4. layout panel ---------------------------------------------------------------------------------------
def test_search_run_shows_layout_alternatives_and_memory(client: Any, make_user: Any, team: Any,
                                                         scenario_for: Any) -> None:
    from engine.performance.api import search
    from planning import services as planning
    from simulations import services as sim
    from simulations.models import RunKind, RunStatus

    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    doc, version, values = planning.scenario_resolve(scenario=scenario)
    run = sim.run_create(team=team, user=planner, kind=RunKind.SEARCH, document=doc, version=version,
                         values=values, scenario=scenario)
    result = sim.jsonable(search(doc, catalog=values, top_k=3).to_dict())
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, result=result, progress=100)
    _login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="layout-panel"' in html and 'id="layout-alternatives"' in html
    assert f"{int(result['candidates_evaluated']):,} layouts evaluated" in html
    assert "GB usable" in html and "80 GiB HBM (85.9 GB)" in html  # H100 SXM: 80 GiB
    for alt in result["alternatives"]:
        assert alt["why_it_loses"].replace("%", "") .split(":")[0] in html.replace("%", "")


# --- 5. dead end with a way out ----------------------------------------------------------------------------
def test_dead_end_run_offers_nearest_gpu_counts(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                                finished_run: Any) -> None:
    from simulations.models import RunStatus

    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    snap = copy.deepcopy(run.input_snapshot)
    snap["document"]["cluster"]["gpus"] = 1000
    snap["document"]["training"]["global_batch"] = 2048
    type(run).objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED, result=None, input_snapshot=snap, error_field="parallelism",
        error="no layout satisfies the fixed settings (tp*pp*dp*cp = gpus, ...)")
    _login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="dead-end-advice"' in html
    assert "1,000 GPUs" in html and "spares" in html
    assert re.search(r"run on <strong>[\d,]+ of the 1,000 GPUs</strong>", html)


# --- 6. tokens ---------------------------------------------------------------------------------------------
def test_token_page_create_shows_secret_once_and_revokes(client: Any, make_user: Any, team: Any) -> None:
    from accounts.models import ApiToken

    finance = make_user("finance", team)
    _login(client, finance)
    page = client.get(reverse("tokens"))
    assert page.status_code == 200 and b'id="token-form"' in page.content
    r = client.post(reverse("tokens"), {"name": "finance export", "team": str(team.pk), "expires": "30"})
    assert r.status_code == 302 and r["Location"] == reverse("tokens")
    r = client.get(reverse("tokens"))
    assert "no-store" in r["Cache-Control"]
    found = re.search(r'value="(fp_[^"]+)"', r.content.decode())
    assert found is not None
    secret = found.group(1)
    token = ApiToken.objects.get(user=finance)
    assert token.expires_at is not None and token.team_id == team.pk
    again = client.get(reverse("tokens")).content.decode()
    assert secret not in again and token.prefix in again
    r = client.post(reverse("token-revoke", args=[token.pk]))
    assert r.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_token_page_refuses_viewers_and_other_users_tokens(client: Any, make_user: Any, team: Any) -> None:
    from accounts.models import ApiToken

    owner = make_user("planner", team)
    token, _raw = ApiToken.issue(user=owner, team=team, name="mine")
    viewer = make_user("viewer", team)
    _login(client, viewer)
    assert b'id="token-form"' not in client.get(reverse("tokens")).content
    assert client.post(reverse("tokens"), {"name": "x", "team": str(team.pk), "expires": "30"}).status_code == 403
    assert client.post(reverse("token-revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_api_token_create_accepts_expiry(make_user: Any, team: Any) -> None:
    from rest_framework.test import APIClient

    user = make_user("planner", team)
    client = APIClient()
    client.force_login(user)
    r = client.post("/api/v1/tokens/", {"name": "n", "team": team.slug, "expires_in_days": 7}, format="json")
    assert r.status_code == 201 and r.json()["expires_at"]
    bad = client.post("/api/v1/tokens/", {"name": "n", "expires_in_days": 0}, format="json")
    assert bad.status_code == 400 and "expires_in_days" in bad.json()["errors"]


# --- 7. the smaller items ----------------------------------------------------------------------------------
def test_scenario_list_names_the_gpu(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    planner = make_user("planner", team)
    scenario_for(team, planner)
    _login(client, planner)
    html = client.get(reverse("scenarios")).content.decode()
    assert "256 × H100-SXM" in html or "256 × NVIDIA H100" in html


def test_builder_defaults_equal_the_catalog(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    from engine.catalog import default_catalog
    from portal.forms import ScenarioBuilderForm

    facility = next(i for i in default_catalog().values() if i.get("kind") == "facility")["specs"]
    _login(client, make_user("planner", team))
    r = client.get(reverse("scenario-new"))
    form: ScenarioBuilderForm = r.context["form"]
    assert float(form["depreciation_years"].value()) == facility["depreciation_years"] == 5
    assert float(form["usd_per_kwh"].value()) == facility["usd_per_kwh"]
    assert float(form["pue"].value()) == facility["pue"]


def test_line_items_show_small_prices_and_fractional_quantities(client: Any, make_user: Any, team: Any,
                                                                scenario_for: Any, finished_run: Any) -> None:
    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    items = run.result["tco"]["line_items"]
    _login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    table = html[html.index('id="line-items"'):]
    electricity = next(i for i in items if i["category"] == "power")
    assert f"${electricity['unit_price_usd']:.2f}" in table  # $0.08 per kWh, not "$0"
    fractional = [i["quantity"] for i in items if 0 < i["quantity"] < 100 and not float(i["quantity"]).is_integer()]
    assert fractional, [i["quantity"] for i in items]
    for q in fractional:
        assert f">{q:,.3g}<" in table, q  # 0.814 kW, not "1" or "0"


def test_small_figures_are_not_rounded_away() -> None:
    from portal.templatetags.portal import fmt, usd

    assert usd(0.08) == "$0.08" and fmt(0.08, "usd_per_kwh") == "$0.08/kWh"
    assert fmt(0.32, "kw") == "0.32 kW"
    assert fmt(17.202394102789956, "num") == "17.2"


def test_percentage_metrics_move_in_points(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                           finished_run: Any) -> None:
    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    a = finished_run(scenario, planner, monte_carlo=0, nic_gbps=200)
    b = finished_run(scenario, planner, monte_carlo=0, nic_gbps=800)
    _login(client, planner)
    r = client.get(reverse("compare") + f"?runs={a.pk},{b.pk}&baseline={a.pk}")
    row = next(x for x in r.context["table"]["rows"] if x["metric"].endswith("mfu"))
    cell = row["cells"][1]
    assert cell["delta_text"].endswith(" pt")
    expected = (b.result["performance"]["mfu"] - a.result["performance"]["mfu"]) * 100
    assert cell["delta_text"] == f"{expected:+.1f} pt"


def test_comparison_default_baseline_is_the_scenarios_own_configuration(
        client: Any, make_user: Any, team: Any, scenario_for: Any, finished_run: Any) -> None:
    from simulations.models import RunStatus, Sweep

    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)  # 400G InfiniBand
    sweep = Sweep.objects.create(team=team, scenario=scenario, axes={"cluster.nic_gbps": [200, 400, 800]},
                                 total_runs=3, status=RunStatus.SUCCEEDED)
    runs = [finished_run(scenario, planner, monte_carlo=0, nic_gbps=s) for s in (200, 400, 800)]
    type(runs[0]).objects.filter(pk__in=[r.pk for r in runs]).update(sweep=sweep)
    for r in runs:
        snap = copy.deepcopy(r.input_snapshot)
        snap["overrides"] = {"cluster.nic_gbps": r.input_snapshot["document"]["cluster"]["nic_gbps"]}
        type(r).objects.filter(pk=r.pk).update(input_snapshot=snap)
    _login(client, planner)
    resp = client.get(reverse("compare") + f"?sweep={sweep.pk}")
    assert resp.context["baseline"].pk == runs[1].pk


def test_run_csv_has_metrics_and_line_items_at_full_precision(client: Any, make_user: Any, team: Any,
                                                              scenario_for: Any, finished_run: Any) -> None:
    """Issue #24: no figure is cut to 6 significant digits; money is exact cents; whole numbers print whole."""
    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    _login(client, planner)
    r = client.get(reverse("run-export", args=[run.pk]) + "?format=csv")
    assert r.status_code == 200
    text = r.content.decode()
    assert "capex_usd" in text and "opex_usd_per_year" in text and "fits_in_gpu_memory" in text
    assert not re.search(r",-?\d+\.0(,|$)", text, re.M), "whole numbers must print without .0"
    summary = {row[0]: row for row in csv.reader(io.StringIO(text.split("\n\n")[0]))}
    step = run.result["performance"]["step_time_s"]
    assert float(summary["performance.step_time_s"][3]) == step  # the same double, not 6 significant figures
    assert summary["performance.step_time_s"][1:3] == ["Step time", "s"]
    for path in ("tco.capex_usd", "tco.annual_opex_usd", "tco.run_cost_usd"):
        cell = summary[path][3]
        assert re.fullmatch(r"-?\d+(\.\d{1,2})?", cell), (path, cell)  # cents, never more decimals
        assert abs(float(cell) - run.result["tco"][path.split(".")[1]]) < 0.01 * len(run.result["tco"]["line_items"])
    api = _login(client, planner).get(f"/api/v1/runs/{run.pk}/export/?fmt=csv").content.decode()
    assert not re.search(r",-?\d+\.0(,|$)", api, re.M) and "capex_usd" in api


def test_reevaluation_summary_names_the_changed_input_and_formats_units(make_user: Any, team: Any,
                                                                        scenario_for: Any,
                                                                        finished_run: Any) -> None:
    from portal.charts import reevaluation_changes
    from simulations.services import run_diff

    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    before = finished_run(scenario, planner, monte_carlo=0)
    after = finished_run(scenario, planner, monte_carlo=0, gpus=320)
    changes, text = run_diff(previous=before, new=after)
    assert "servers 32 → 40" in text, text
    rows = {r["metric"]: r for r in reevaluation_changes(changes, limit=50)}
    stranded = rows.get("tco.stranded_usd_per_year")
    if stranded is not None:
        assert stranded["format"] == "usd"


def test_login_page_hints_at_the_demo_login(client: Any) -> None:
    html = client.get(reverse("login")).content.decode()
    assert 'id="login-hint"' in html and "make run" in html and "demo" in html


def test_uncertainty_without_ranges_is_said_plainly(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                                    finished_run: Any) -> None:
    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=50)
    result = copy.deepcopy(run.result)
    result["monte_carlo"]["inputs"] = []
    for key in ("run_cost_usd", "time_to_train_days"):
        band = result["monte_carlo"].get(key)
        if isinstance(band, dict):
            band.update({"p10": band["p50"], "p90": band["p50"]})
    type(run).objects.filter(pk=run.pk).update(result=result)
    _login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="uncertainty-none"' in html and "P10 = P50 = P90" in html


def test_dead_end_run_error_carries_the_way_out_for_api_users(make_user: Any, team: Any, scenario_for: Any) -> None:
    """The failed run's stored error (what the API returns) names the nearest counts, not only the rule."""
    from planning import services as planning
    from simulations import services as sim
    from simulations.models import RunKind, RunStatus

    planner = make_user("planner", team)
    scenario = scenario_for(team, planner)
    doc, version, values = planning.scenario_resolve(scenario=scenario)
    doc["cluster"]["gpus"] = 1000
    doc["training"]["global_batch"] = 2048
    run = sim.run_create(team=team, user=planner, kind=RunKind.PREDICT, document=doc, version=version,
                         values=values, scenario=scenario)
    sim.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.error_field.startswith("parallelism")
    assert "no layout" in run.error.lower() and "Way out" in run.error
    assert re.search(r"run on [\d,]+ of the 1,000 GPUs and keep [\d,]+ as spares", run.error), run.error


def test_uncertainty_band_names_the_catalog_default_ranges(client: Any, make_user: Any, team: Any,
                                                         scenario_for: Any, finished_run: Any) -> None:
    """#15 item 3: a scenario without ranges still gets a real band, drawn over the catalog default ranges the
    sensitivity chart swings, and the run page says which inputs those are."""
    planner = make_user("planner", team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=200)
    mc = run.result["monte_carlo"]
    assert mc["run_cost_usd"]["p10"] < mc["run_cost_usd"]["p90"]
    _login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="uncertainty-inputs"' in html and "use the catalog's default ranges (the same inputs the sensitivity chart swings)" in html
    assert 'id="uncertainty-none"' not in html
    # the inputs in words from the metric registry, not raw paths
    note = html.split('id="uncertainty-inputs"')[1].split("</p>")[0]
    assert "costs." not in note and "unit price" in note
