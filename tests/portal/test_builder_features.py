"""Scenario builder: non-blocking pod under oversubscription, uncertainty ranges, fleet picker."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

BIG = {**BUILDER_POST, "gpus": 1024}


def _estimate(client: Any, data: dict[str, Any]) -> dict[str, str]:
    html = client.post(reverse("scenario-preview"), data, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="estimate-result"' in html, html[:1500]
    return {k: re.search(rf'id="est-{k}">([^<]*)<', html).group(1).strip()  # type: ignore[union-attr]
            for k in ("mfu", "network-wait", "step-time")}


# --- oversubscription / non-blocking pod ------------------------------------------------------------------
def test_pod_field_rendered_with_default_and_help(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    html = client.get(reverse("scenario-new")).content.decode()
    assert 'name="pod_gpus"' in html and "Non-blocking pod (GPUs)" in html
    assert 'id="pod-field"' in html and "is-collapsed" in html  # hidden while non-blocking (1:1)
    assert "oversubscribed tier" in html and "the engine&#x27;s default" in html
    # issue #21: the portal writes no pod of its own (it used to suggest 32 servers): empty is the engine's default
    assert 'name="pod_gpus" placeholder' not in html


def test_live_estimate_reacts_to_oversubscription_and_pod(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    # 1,024 GPUs fit a 2-tier fat-tree; issue #24: a pod never adds a tier, so in a 2-tier cluster any pod smaller
    # than the cluster is one leaf (the oversubscription sits at the leaf uplinks) and a pod as large as the cluster
    # means nothing is oversubscribed. The estimate follows what the fabric sizing builds.
    BIG_FT = {**BIG, "topology": "fat-tree"}
    flat = _estimate(client, {**BIG_FT, "oversubscription": 1.0})
    oversub = _estimate(client, {**BIG_FT, "oversubscription": 4.0, "pod_gpus": ""})
    small_pod = _estimate(client, {**BIG_FT, "oversubscription": 4.0, "pod_gpus": 64})
    as_float = {k: float(v["mfu"].rstrip("%")) for k, v in (("flat", flat), ("oversub", oversub), ("small", small_pod))}
    assert as_float["flat"] > as_float["oversub"]  # traffic leaving the leaf slows down
    assert small_pod["mfu"] == oversub["mfu"]  # the 64-GPU pod is clamped to a leaf: the same fabric is built
    assert small_pod["network-wait"] != flat["network-wait"]
    assert _estimate(client, {**BIG_FT, "oversubscription": 4.0, "pod_gpus": 1024})["mfu"] == flat["mfu"]
    rail = {**BIG, "topology": "rail-optimized", "oversubscription": 4.0}
    assert _estimate(client, {**rail, "pod_gpus": 64})["mfu"] == _estimate(client, {**rail, "pod_gpus": 256})["mfu"]
    assert _estimate(client, {**rail, "pod_gpus": 256})["mfu"] != _estimate(client, {**BIG, "oversubscription": 1.0})["mfu"]


def test_pod_saved_only_when_oversubscribed(client: Any, make_user: Any, catalog: Any) -> None:
    from planning.models import Scenario

    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BIG, "name": "flat", "pod_gpus": 64})
    assert r.status_code == 302
    assert "pod_gpus" not in Scenario.objects.get(name="flat").cluster  # 1:1: the pod changes nothing
    r = client.post(reverse("scenario-new"), {**BIG, "name": "default pod", "oversubscription": 4})
    assert r.status_code == 302
    # no pod given: none written, the engine's default applies (as for the same cluster posted to the API)
    assert "pod_gpus" not in Scenario.objects.get(name="default pod").cluster
    r = client.post(reverse("scenario-new"), {**BIG, "name": "pod", "oversubscription": 4, "pod_gpus": 128})
    s = Scenario.objects.get(name="pod")
    assert s.cluster["pod_gpus"] == 128 and s.cluster["oversubscription"] == 4
    html = client.get(reverse("scenario-edit", args=[s.pk])).content.decode()
    assert re.search(r'name="pod_gpus"[^>]*value="128"', html) and "is-collapsed" not in html
    for bad, message in ((2048, "At most the cluster size"), (100, "multiple of 8")):
        r = client.post(reverse("scenario-new"), {**BIG, "oversubscription": 4, "pod_gpus": bad})
        assert r.status_code == 400 and 'id="id_pod_gpus-error"' in r.content.decode()
        assert message in r.content.decode()


# --- uncertainty ranges -----------------------------------------------------------------------------------
RANGES = {"usd_per_kwh_low": 0.06, "usd_per_kwh_high": 0.15, "pue_low": 1.2, "pue_high": 1.5,
          "server_price_low_pct": -10, "server_price_high_pct": 25, "failure_rate_scale_low": 0.5,
          "failure_rate_scale_high": 3, "distribution": "pert"}


def test_ranges_saved_round_tripped_and_drive_monte_carlo(
    client: Any, make_user: Any, team: Any, catalog: Any, finished_run: Any
) -> None:
    from planning import services
    from planning.models import Scenario

    user = make_user("planner", team=team)
    login(client, user)
    assert "Uncertainty ranges (optional)" in client.get(reverse("scenario-new")).content.decode()
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, **RANGES})
    assert r.status_code == 302, r.content.decode()[:2000]
    s = Scenario.objects.get(name=BUILDER_POST["name"])
    assert s.costs["usd_per_kwh"] == {"low": 0.06, "likely": 0.08, "high": 0.15}
    assert s.costs["pue"] == {"low": 1.2, "likely": 1.3, "high": 1.5}
    assert s.costs["goodput"]["failure_rate_scale"] == {"low": 0.5, "likely": 1.0, "high": 3.0}
    price = services.catalog_values(version=catalog)["HGX-H100"]["unit_price_usd"]
    assert s.costs["prices"]["HGX-H100"] == {"low": round(price * 0.9, 2), "likely": price,
                                             "high": round(price * 1.25, 2)}
    assert s.uncertainty == {"distribution": "pert"}

    # edit page shows them again, and saving unchanged keeps them
    html = client.get(reverse("scenario-edit", args=[s.pk])).content.decode()
    for name, value in (("usd_per_kwh_low", "0.06"), ("usd_per_kwh_high", "0.15"), ("pue_high", "1.5"),
                        ("server_price_low_pct", "-10.0"), ("server_price_high_pct", "25.0"),
                        ("failure_rate_scale_high", "3.0")):
        assert re.search(rf'name="{name}"[^>]*value="{re.escape(value)}"', html), name
    assert re.search(r'<details class="ranges"[^>]*open', html)
    assert re.search(r'<option value="pert" selected', html)

    # a run gets real P10/P50/P90 bands from these ranges
    run = finished_run(s, user, monte_carlo=300)
    mc = run.result["monte_carlo"]
    assert mc["run_cost_usd"]["p10"] < mc["run_cost_usd"]["p50"] < mc["run_cost_usd"]["p90"]
    assert {"costs.usd_per_kwh", "costs.pue", "costs.prices.HGX-H100",
            "costs.goodput.failure_rate_scale"} <= set(mc["inputs"])
    assert mc["time_to_train_days"]["p10"] < mc["time_to_train_days"]["p90"]  # failure rate moves goodput

    # clearing the ranges makes the inputs fixed again
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**BUILDER_POST, "usd_per_kwh": 0.09})
    assert r.status_code == 302
    s.refresh_from_db()
    assert s.costs["usd_per_kwh"] == 0.09 and s.costs["pue"] == 1.3
    assert "prices" not in s.costs and "goodput" not in s.costs and s.uncertainty == {}


def test_edit_keeps_cost_keys_the_builder_does_not_show(
    client: Any, make_user: Any, team: Any, scenario_for: Any
) -> None:
    from planning import services

    user = make_user("planner", team=team)
    s = scenario_for(team, user)
    services.scenario_update(scenario=s, user=user, costs={**s.costs, "facility_mode": "owned",
                                                         "prices": {"QM9700": 40000}})
    login(client, user)
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**BUILDER_POST, "name": s.name})
    assert r.status_code == 302
    s.refresh_from_db()
    assert s.costs["facility_mode"] == "owned" and s.costs["prices"] == {"QM9700": 40000}


def test_bad_ranges_show_on_the_field(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "usd_per_kwh_low": 0.1, "pue_high": 1.1})
    html = r.content.decode()
    assert r.status_code == 400
    assert 'id="id_usd_per_kwh_low-error"' in html and 'id="id_pue_high-error"' in html
    assert "likely value" in html and 'value="0.1"' in html


# --- fleet picker -----------------------------------------------------------------------------------------
@pytest.fixture
def fleet(team: Any, make_user: Any, catalog: Any) -> Any:
    from planning import services

    return services.fleet_create(team=team, user=make_user("admin", team=team), name="Ashburn H100",
                                 server_model="HGX-H100", server_count=128, nic_gbps=400, fabric="roce",
                                 topology="fat-tree", oversubscription=2.0)


def test_fleet_picker_builds_on_the_fleet(client: Any, make_user: Any, team: Any, fleet: Any) -> None:
    from planning import services
    from planning.models import Scenario

    login(client, make_user("planner", team=team))
    html = client.get(reverse("scenario-new")).content.decode()
    assert 'name="fleet"' in html and f'<option value="{fleet.pk}">Ashburn H100 · 1,024 GPUs</option>' in html
    assert 'id="fleet-clusters"' in html and '"fabric": "roce"' in html  # json_script for the JS
    # cluster fields are not posted when a fleet is picked (they are disabled in the page)
    data = {k: v for k, v in BUILDER_POST.items() if k not in ("gpu", "gpus", "gpus_per_node", "nic_gbps",
                                                                "fabric", "topology", "oversubscription")}
    est = _estimate(client, {**data, "fleet": fleet.pk})
    assert est["mfu"].endswith("%")
    r = client.post(reverse("scenario-new"), {**data, "fleet": fleet.pk, "pod_gpus": 512})
    assert r.status_code == 302, r.content.decode()[:2000]
    s = Scenario.objects.get(name=BUILDER_POST["name"])
    assert s.fleet == fleet and s.cluster == {"pod_gpus": 512}
    doc = services.scenario_document(scenario=s)
    assert doc["cluster"]["gpus"] == 1024 and doc["cluster"]["fabric"] == "roce" and doc["cluster"]["pod_gpus"] == 512
    # edit: the fleet is selected and its cluster values are shown read-only
    html = client.get(reverse("scenario-edit", args=[s.pk])).content.decode()
    assert f'<option value="{fleet.pk}" selected>' in html and 'class="from-fleet"' in html
    assert ('<input type="number" name="gpus" value="1024" min="1" max="1048576" step="any" disabled '
            'aria-describedby="id_gpus_helptext" id="id_gpus">') in html
    assert '<input type="radio" name="fabric" value="roce" id="id_fabric_1" disabled checked>' in html
    assert '<select name="gpu" disabled id="id_gpu">' in html and "edit the fleet" in html
    # posted cluster values are ignored while a fleet supplies the cluster
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**BUILDER_POST, "fleet": fleet.pk, "gpus": 8})
    assert r.status_code == 302
    s.refresh_from_db()
    assert s.fleet == fleet and "gpus" not in s.cluster
    # back to an ad-hoc cluster
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**BUILDER_POST, "fleet": ""})
    assert r.status_code == 302
    s.refresh_from_db()
    assert s.fleet is None and s.cluster["gpus"] == 256


def test_fleet_picker_offers_only_the_teams_fleets(
    client: Any, make_user: Any, team: Any, other_team: Any, catalog: Any
) -> None:
    from planning import services

    theirs = services.fleet_create(team=other_team, user=make_user("admin", team=other_team), name="Theirs",
                                   server_model="HGX-H100", server_count=32)
    login(client, make_user("planner", team=team))
    html = client.get(reverse("scenario-new")).content.decode()
    assert "Theirs" not in html
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "fleet": theirs.pk})
    assert r.status_code == 400 and 'id="id_fleet-error"' in r.content.decode()
    preview = client.post(reverse("scenario-preview"), {**BUILDER_POST, "fleet": theirs.pk}, HTTP_HX_REQUEST="true")
    assert 'id="estimate-errors"' in preview.content.decode()
