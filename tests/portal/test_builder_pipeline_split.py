"""The builder's box for parallelism.embedding_loss_in_split (the embedding and the loss each take one layer's place in
the pipeline split, so pp * vpp may reach model.layers + 2): ticked in manual mode it writes the key, and the engine
takes 16 x 8 = 128 virtual stages for 126 layers; unticked, the engine's parser refuses them (its message, at
parallelism.vpp, lands beside the vpp input). An edit shows the stored flag ticked, and unticking it removes the
key. vpp 8 comes from the stored scenario (shown in the vpp input, so the edit keeps it)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, DOC, refused_builder_post
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

#: Llama 3 405B's layer count (arXiv 2407.21783): 126 layers, 16 pipeline ranks x 8 virtual stages = 128 = 126 + 2
LAYERS = 126
BOX = "embedding_loss_in_split"


def _stored_scenario(team: Any, user: Any, **parallelism: Any) -> Any:
    """Llama-3-8B's shape with 126 layers on 256 H100s, its degrees given (vpp 8)."""
    from planning import services

    doc = copy.deepcopy(DOC)
    model = {**doc["model"], "name": "Deep-8B", "layers": LAYERS}
    par = {"tp": 1, "pp": 8, "cp": 1, "ep": 1, "vpp": 8, **parallelism}
    workload = services.workload_create(team=team, user=user, name="Deep-8B", model=model,
                                        training=doc["training"], parallelism=par)
    return services.scenario_create(team=team, user=user, name="Deep", workload=workload,
                                    cluster=doc["cluster"], costs=doc["costs"])


def _edit_page(client: Any, s: Any) -> dict[str, str]:
    return _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())


def _unticked(posted: dict[str, str]) -> dict[str, str]:
    """What a browser submits with the box unticked: no value at all."""
    return {k: v for k, v in posted.items() if k != BOX}


def test_the_ticked_box_lets_pp_times_vpp_reach_the_layers_plus_two(client: Any, make_user: Any, team: Any,
                                                                      catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    login(client, user)
    posted = _edit_page(client, s)
    assert posted["par_mode"] == "manual" and BOX not in posted  # stored without the flag: the box unticked
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "pp": 16, BOX: "on"})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    par = s.workload.parallelism
    assert (par["pp"], par["vpp"], par[BOX]) == (16, 8, True)


def test_without_the_box_the_engine_refuses_it_beside_the_vpp_input(client: Any, make_user: Any, team: Any,
                                                                     catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    login(client, user)
    r, errors = refused_builder_post(client, {**_unticked(_edit_page(client, s)), "pp": 16},
                                     url=reverse("scenario-edit", args=[s.pk]))
    assert list(errors) == ["vpp"], errors  # parallelism.vpp's input
    text = " ".join(errors["vpp"])
    assert "pp*vpp=128" in text and "model.layers=126" in text  # engine/document/layout_checks.py
    assert "model.layers=126" in r.content.decode()
    s.refresh_from_db()
    assert s.workload.parallelism["pp"] == 8 and BOX not in s.workload.parallelism  # nothing saved


def test_a_new_scenario_writes_the_flag_only_when_ticked_in_manual_mode(client: Any, make_user: Any,
                                                                         catalog: Any) -> None:
    from planning.models import Scenario

    login(client, make_user("planner"))
    manual = {**BUILDER_POST, "layers": LAYERS, "preset": "custom", "par_mode": "manual", "tp": 1, "pp": 16}
    for name, extra, flag in (("ticked", {BOX: "on"}, True), ("unticked", {}, None)):
        r = client.post(reverse("scenario-new"), {**manual, "name": name, **extra})
        assert r.status_code == 302, r.content.decode()[:2000]
        assert Scenario.objects.get(name=name).workload.parallelism.get(BOX) is flag, name
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "searched", BOX: "on"})  # par_mode auto
    assert r.status_code == 302, r.content.decode()[:2000]
    assert Scenario.objects.get(name="searched").workload.parallelism == "auto"


def test_an_edit_shows_the_stored_flag_and_unticking_removes_it(client: Any, make_user: Any, team: Any,
                                                                 catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user, **{BOX: True})
    login(client, user)
    posted = _edit_page(client, s)
    assert posted.get(BOX) == "on"  # shown ticked
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.parallelism[BOX] is True  # an untouched edit keeps it
    r = client.post(reverse("scenario-edit", args=[s.pk]), _unticked(posted))
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert BOX not in s.workload.parallelism  # the box wins over the stored value
    assert s.workload.parallelism["vpp"] == 8


def test_initial_values_read_the_flag() -> None:
    from portal.forms.builder import ScenarioBuilderForm

    doc = {**copy.deepcopy(DOC), "parallelism": {"tp": 1, "pp": 16, "vpp": 8, BOX: True}}
    assert ScenarioBuilderForm.initial_from_document(doc)[BOX] is True
    doc["parallelism"] = {"tp": 1, "pp": 16, "vpp": 4}
    assert not ScenarioBuilderForm.initial_from_document(doc).get(BOX)


def test_a_caller_without_the_box_keeps_the_stored_flag() -> None:
    from portal.forms.builder_sections import parallelism_section

    stored = {"tp": 1, "pp": 16, "cp": 1, "ep": 1, "vpp": 8, BOX: True}
    assert parallelism_section({"par_mode": "manual", "tp": 1, "pp": 16}, stored)[BOX] is True
    assert BOX not in parallelism_section({"par_mode": "manual", "tp": 1, "pp": 16, BOX: False}, stored)


def test_engine_errors_at_the_flag_land_beside_the_box() -> None:
    from portal.forms.builder import ScenarioBuilderForm

    form = ScenarioBuilderForm(data={**BUILDER_POST, "name": "x"})
    assert form.is_valid(), form.errors
    form.add_path_errors({f"parallelism.{BOX}": "must be true or false"})
    assert form.errors == {BOX: ["must be true or false"]}
