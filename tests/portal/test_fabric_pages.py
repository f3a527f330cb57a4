"""The fabric study page (issue #13): submit a study, follow it, read the results; team-scoped."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_submit_follow_and_read_a_fabric_study(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    user = make_user("planner", team=team)
    scenario = scenario_for(team, user, fabric="roce", topology="fat-tree")
    client.force_login(user)
    page = client.get(reverse("fabric") + f"?scenario={scenario.pk}")
    assert page.status_code == 200
    html = page.content.decode()
    assert "New study" in html and scenario.name in html and 'name="traffic"' in html

    r = client.post(reverse("fabric"), {"scenario": scenario.pk, "traffic": "ring-allreduce", "routing": "compare",
                                        "placement": "packed", "seeds": 3, "ranks": 128})
    assert r.status_code == 302
    run = SimulationRun.objects.get()
    assert r["Location"] == reverse("fabric-run", args=[run.pk])
    assert run.kind == "fabric" and run.params == {"traffic": "ring-allreduce", "routing": "compare",
                                                   "placement": "packed", "seeds": 3, "ranks": 128}
    waiting = client.get(r["Location"]).content.decode()
    assert 'http-equiv="refresh"' in waiting and "Cancel study" in waiting

    services.run_execute(run_id=run.pk)
    html = client.get(r["Location"]).content.decode()
    assert 'http-equiv="refresh"' not in html
    assert re.search(r"single-QP ECMP delivers \d+% of line rate to this 128-GPU ring all-reduce; 8 QPs: \d+%; "
                     r"adaptive: \d+%", html)
    assert 'id="efficiency-table"' in html and "Utilisation per tier" in html and "Leaf ↔ spine" in html
    assert "Per-flow throughput" in html and "flow-hist" in html
    listing = client.get(reverse("fabric")).content.decode()
    assert reverse("fabric-run", args=[run.pk]) in listing


def test_bad_options_show_field_errors(client: Any, make_user: Any, team: Any, scenario_for: Any) -> None:
    from simulations.models import SimulationRun

    user = make_user("planner", team=team)
    scenario = scenario_for(team, user)
    client.force_login(user)
    r = client.post(reverse("fabric"), {"scenario": scenario.pk, "traffic": "ring-allreduce", "routing": "warp",
                                        "placement": "packed", "seeds": 0})
    assert r.status_code == 400
    html = r.content.decode()
    assert "field-error" in html and SimulationRun.objects.count() == 0
    for raw in ("abc", "99999999999999999999999", "-1", "1e3"):
        r = client.post(reverse("fabric"), {"scenario": raw, "traffic": "ring-allreduce", "routing": "compare",
                                            "placement": "packed", "seeds": 1})
        assert r.status_code in (400, 404), (raw, r.status_code)
    assert SimulationRun.objects.count() == 0
    assert client.get("/fabric/runs/99999999999999999999999/").status_code in (400, 404)


def test_other_teams_and_viewers(client: Any, make_user: Any, team: Any, other_team: Any, scenario_for: Any) -> None:
    from simulations import services

    owner = make_user("planner", team=team)
    scenario = scenario_for(team, owner)
    run = services.run_submit(scenario=scenario, user=owner, kind="fabric", params={"seeds": 1})
    stranger = make_user("admin", team=other_team)
    client.force_login(stranger)
    assert client.get(reverse("fabric-run", args=[run.pk])).status_code == 404
    html = client.get(reverse("fabric")).content.decode()
    assert scenario.name not in html  # not offered, not listed
    body = {"scenario": scenario.pk, "traffic": "ring-allreduce", "routing": "compare", "placement": "packed",
            "seeds": 1}
    assert client.post(reverse("fabric"), body).status_code == 404  # another team's scenario is not found
    viewer = make_user("viewer", team=team)
    client.force_login(viewer)
    assert client.get(reverse("fabric-run", args=[run.pk])).status_code == 200  # may read
    assert client.post(reverse("fabric"), body).status_code == 403  # may not plan


def test_use_a_study_for_a_scenario_and_unpin_it(client: Any, make_user: Any, team: Any, other_team: Any,
                                                 scenario_for: Any) -> None:
    from simulations import services

    user = make_user("planner", team=team)
    scenario = scenario_for(team, user, fabric="roce", topology="fat-tree")
    run = services.run_submit(scenario=scenario, user=user, kind="fabric", params={"seeds": 2, "ranks": 64})
    services.run_execute(run_id=run.pk)
    client.force_login(user)
    html = client.get(reverse("fabric-run", args=[run.pk])).content.decode()
    assert 'id="pin-study"' in html and scenario.name in html
    pin = reverse("fabric-run-pin", args=[run.pk])
    r = client.post(pin, {"scenario": scenario.pk})
    assert r.status_code == 302 and r["Location"] == reverse("scenario-detail", args=[scenario.pk])
    scenario.refresh_from_db()
    assert scenario.fabric_study["run"] == run.pk
    page = client.get(r["Location"]).content.decode()
    assert 'id="fabric-study-pin"' in page and f"fabric study #{run.pk}" in page
    assert "Pinned: " in client.get(reverse("fabric-run", args=[run.pk])).content.decode()
    # another team neither sees the study nor can pin its own scenario to it
    stranger = make_user("admin", team=other_team)
    theirs = scenario_for(other_team, stranger)
    client.force_login(stranger)
    assert client.post(pin, {"scenario": theirs.pk}).status_code == 404
    assert client.post(pin, {"scenario": scenario.pk}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.fabric_study == {}
    # a viewer may read but not pin
    viewer = make_user("viewer", team=team)
    client.force_login(viewer)
    assert client.post(pin, {"scenario": scenario.pk, "unpin": "1"}).status_code == 403
    for raw in ("abc", "99999999999999999999999", ""):
        assert client.post(pin, {"scenario": raw}).status_code == 404
    client.force_login(user)
    r = client.post(pin, {"scenario": scenario.pk, "unpin": "1"})
    assert r.status_code == 302
    scenario.refresh_from_db()
    assert scenario.fabric_study == {}
    assert "Not pinned" in client.get(reverse("scenario-detail", args=[scenario.pk])).content.decode()
