"""Words that read right (issue #24 items 3 and 5): switching GPU brings its default NIC (from the catalog), the power
draw field is named for what it does, the scenario list keeps the latest $ per run when a fabric study ran after
it, cost categories and catalog figures in words and with separators, counts pluralised, a copy button for a new
token's secret."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db


def _catalog_nic_speeds() -> dict[str, int]:
    """Each GPU's default NIC speed as the loaded catalog states it (the data, not the form's reading of it)."""
    from planning.models import CatalogItem

    return {i.key: int(i.specs["default_nic_gbps"]) for i in CatalogItem.objects.filter(kind="gpu")
            if "default_nic_gbps" in (i.specs or {})}


def _checked_nic(html: str) -> list[str]:
    return re.findall(r'<input type="radio" name="nic_gbps" value="(\d+)"[^>]*checked', html)


# --- switching GPU brings its NIC ----------------------------------------------------------------------------
def test_builder_hands_the_page_each_gpus_catalog_nic(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    html = client.get(reverse("scenario-new")).content.decode()
    found = re.search(r'<script id="gpu-nic-speeds" type="application/json">(.*?)</script>', html, re.S)
    assert found is not None
    speeds = json.loads(found.group(1))
    catalog_speeds = _catalog_nic_speeds()
    assert speeds == catalog_speeds
    assert speeds["GB300"] == 800 and speeds["B300"] == 800 and speeds["A100-80GB"] == 200
    # the new scenario's GPU (H100) starts on its own NIC
    assert _checked_nic(html) == [str(catalog_speeds["H100-SXM"])]


def test_a_gpu_without_a_stored_link_speed_shows_its_catalog_nic(catalog: Any) -> None:
    """A scenario made over the API names the GPU only: the builder shows what the engine will use (800G for
    GB300), never a fixed 400."""
    from planning import services
    from portal.forms import ScenarioBuilderForm
    from tests.portal.conftest import DOC

    _version, values = services.catalog_resolve(catalog=None)
    doc = {**DOC, "cluster": {"gpu": "GB300", "gpus": 1152, "gpus_per_node": 72, "fabric": "infiniband"}}
    initial = ScenarioBuilderForm.initial_from_document(doc, catalog=values)
    assert initial["nic_gbps"] == 800
    form = ScenarioBuilderForm(initial={"gpu": "GB300"}, catalog_items=values.values())
    assert form.initial["nic_gbps"] == 800
    given = {**doc, "cluster": {**doc["cluster"], "nic_gbps": 400}}  # a speed the document gives is kept
    assert ScenarioBuilderForm.initial_from_document(given, catalog=values)["nic_gbps"] == 400


def test_edit_page_of_a_gb300_scenario_checks_800g(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    from planning import services
    from tests.portal.conftest import DOC

    planner = make_user("planner", team=team)
    workload = services.workload_create(team=team, user=planner, name="Llama-3-8B", model=DOC["model"],
                                        training=DOC["training"], parallelism="auto")
    scenario = services.scenario_create(team=team, user=planner, name="gb300", workload=workload,
                                        cluster={"gpu": "GB300", "gpus": 1152, "gpus_per_node": 72,
                                                 "fabric": "infiniband", "topology": "fat-tree"})
    login(client, planner)
    html = client.get(reverse("scenario-edit", args=[scenario.pk])).content.decode()
    assert _checked_nic(html) == ["800"]


def test_the_builder_script_follows_the_gpu_with_its_nic() -> None:
    """The builder's script reads the server's table and sets the link-speed radio on a GPU change."""
    from django.contrib.staticfiles import finders

    path = finders.find("portal/js/app.js")
    assert path is not None
    js = Path(str(path)).read_text(encoding="utf-8")
    assert 'readJSON("gpu-nic-speeds")' in js and 'inputs("nic_gbps")' in js


# --- the power-draw field --------------------------------------------------------------------------------------
def test_power_draw_field_says_it_scales_electricity(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    html = client.get(reverse("scenario-new")).content.decode()
    label = re.search(r'<label for="id_avg_utilization">([^<]*)</label>', html)
    assert label is not None and "power draw" in label.group(1).lower()
    assert "Average utilization" not in html and "Share of the year" not in html
    block = html.split('id="id_avg_utilization"')[1][:1200]
    assert "electricity" in block


# --- the scenario list keeps the latest $ per run ------------------------------------------------------------
def test_scenario_list_keeps_the_tco_figure_after_a_fabric_study(client: Any, make_user: Any, team: Any,
                                                                 scenario_for: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from planning import services as planning
    from simulations import services as sim
    from simulations.models import RunKind, SimulationRun

    planner = make_user("planner", team=team)
    scenario = scenario_for(team, planner, name="studied")
    doc, version, values = planning.scenario_resolve(scenario=scenario)
    tco, study, queued = (sim.run_create(team=team, user=planner, kind=RunKind.TCO, document=doc, version=version,
                                         values=values, scenario=scenario, overrides={"cluster.gpus": 8 * (i + 1)},
                                         label=f"r{i}") for i in range(3))
    now = timezone.now()
    SimulationRun.objects.filter(pk=tco.pk).update(status="succeeded", result={"tco": {"run_cost_usd": 123456.0}},
                                                   created_at=now - timedelta(minutes=3))
    SimulationRun.objects.filter(pk=study.pk).update(kind=RunKind.FABRIC, status="succeeded",
                                                     result={"efficiency": {"p50": 0.9}},
                                                     created_at=now - timedelta(minutes=2))
    SimulationRun.objects.filter(pk=queued.pk).update(status="queued", created_at=now - timedelta(minutes=1))
    login(client, planner)
    listing = client.get(reverse("scenarios")).content.decode().split('id="scenarios-table"')[1]
    row = listing.split("studied")[1].split("</tr>")[0]
    assert f"#{queued.pk}" in row  # the last run is the last run, whatever its kind
    assert "$123.5k" in row  # and $ per run is the latest finished TCO run's


# --- words and numbers ---------------------------------------------------------------------------------------
def test_cost_categories_read_as_words(client: Any, make_user: Any, team: Any, scenario_for: Any,
                                       finished_run: Any) -> None:
    planner = make_user("planner", team=team)
    run = finished_run(scenario_for(team, planner), planner, monte_carlo=0)
    login(client, planner)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    table = html.split('id="line-items"')[1].split("</table>")[0]
    cells = set(re.findall(r"<tr><td>([^<]*)</td>", table))
    assert "GPU servers" in cells and "Network" in cells and "Power" in cells
    assert not any("_" in c for c in cells)


def test_catalog_figures_have_thousands_separators(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("viewer"))
    html = client.get(reverse("catalog"), {"kind": "gpu"}).content.decode()
    row = html.split(">B200<")[1].split("</tr>")[0]
    figures = re.findall(r'<td class="num"[^>]*>([^<]*)</td>', row)
    assert "4,500" in figures and "2,250" in figures  # FP8 and BF16 dense TFLOP/s of the B200
    assert "1,800" in figures and "180" in figures  # NVLink GB/s, HBM GB: a whole float without its ".0"
    assert not any(f.endswith(".0") for f in figures)
    assert "(TFLOP/s)" in html


@pytest.mark.parametrize(("ranks", "nodes", "steps", "words"), [
    (8, 1, 1, ("8 ranks on 1 node", "over 1 step;")),
    (1, 1, 2, ("1 rank on 1 node", "over 2 steps;")),
    (1024, 128, 1500, ("1,024 ranks on 128 nodes", "over 1,500 steps;")),
])
def test_calibration_counts_are_pluralised(ranks: int, nodes: int, steps: int, words: tuple[str, str]) -> None:
    nccl = SimpleNamespace(status="ready", kind="nccl-tests", label="a.txt", filename="a.txt", size_bytes=10,
                           summary={"collective": "all_reduce", "ranks": ranks, "nodes": nodes})
    log = SimpleNamespace(status="ready", kind="step-log", label="b.log", filename="b.log", size_bytes=10,
                          summary={"format": "megatron", "step_time_s": 1.5, "steps_used": steps, "notes": []})
    html = render_to_string("portal/_calibration_jobs.html", {"rows": [{"upload": nccl}, {"upload": log}]})
    assert words[0] in html and words[1] in html


def test_new_token_secret_has_a_copy_button(client: Any, make_user: Any) -> None:
    user = make_user("planner")
    login(client, user)
    r = client.post(reverse("tokens"), {"name": "finance export", "team": str(user.test_team.pk), "expires": "30"})
    assert r.status_code == 302
    html = client.get(reverse("tokens")).content.decode()
    secret = re.search(r'id="token-secret"[^>]*value="(fp_[^"]+)"', html)
    assert secret is not None
    button = re.search(r'<button type="button"[^>]*data-copy="token-secret"[^>]*>Copy</button>', html)
    assert button is not None
    assert 'id="copy-token-done"' in html and 'aria-describedby="copy-token-done"' in button.group(0)
    again = client.get(reverse("tokens")).content.decode()  # shown once: no secret, no copy button
    assert 'data-copy="token-secret"' not in again
