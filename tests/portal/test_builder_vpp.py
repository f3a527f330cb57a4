"""The builder's input for the interleaved pipeline degree (parallelism.vpp, virtual pipeline stages per pipeline
rank): in manual mode a number writes that degree and the estimate runs with it; left empty it is searched
("auto"), except that an untouched edit keeps a stored list of allowed values (as for the other degrees). An edit
shows a stored number. The engine's refusals at parallelism.vpp (pp 1, pp * vpp above the layers; a framework
without an interleaved schedule, found by the layout search) land beside the vpp input, and nothing is saved."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, DOC, refused_builder_post
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

#: Llama-3-8B (32 layers) on 256 H100s, degrees given: 2 x 4 x 32 = 256 GPUs; 8 layers per stage
MANUAL = {**BUILDER_POST, "par_mode": "manual", "tp": 2, "pp": 4, "cp": 1}


def _stored_scenario(team: Any, user: Any, **parallelism: Any) -> Any:
    from planning import services

    doc = copy.deepcopy(DOC)
    par = {"tp": 2, "pp": 4, "cp": 1, "ep": 1, **parallelism}
    workload = services.workload_create(team=team, user=user, name="Llama-3-8B", model=doc["model"],
                                        training=doc["training"], parallelism=par)
    return services.scenario_create(team=team, user=user, name="Interleaved", workload=workload,
                                    cluster=doc["cluster"], costs=doc["costs"])


def _edit_page(client: Any, s: Any) -> dict[str, str]:
    return _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())


def _saved_vpp(name: str) -> Any:
    from planning.models import Scenario

    return Scenario.objects.get(name=name).workload.parallelism["vpp"]


def test_a_manual_vpp_is_stored_and_the_estimate_runs_with_it(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**MANUAL, "name": "vpp4", "vpp": 4})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert _saved_vpp("vpp4") == 4
    for vpp in (2, 4):  # the predicted layout follows the input
        r = client.post(reverse("scenario-preview"), {**MANUAL, "vpp": vpp}, HTTP_HX_REQUEST="true")
        estimate = r.context["estimate"]
        assert estimate is not None, r.content.decode()[:1500]
        assert (estimate["parallelism"]["pp"], estimate["parallelism"]["vpp"]) == (4, vpp)


def test_an_empty_vpp_on_a_new_scenario_is_searched(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**MANUAL, "name": "searched", "vpp": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert _saved_vpp("searched") == "auto"  # not 1, as an empty tp or pp would be


def test_an_untouched_edit_keeps_a_stored_list_of_allowed_values(client: Any, make_user: Any, team: Any,
                                                                catalog: Any) -> None:
    user = make_user("planner", team=team)
    login(client, user)
    for stored in ([1, 2], "auto"):
        s = _stored_scenario(team, user, vpp=copy.deepcopy(stored))
        posted = _edit_page(client, s)
        assert posted["par_mode"] == "manual" and posted["vpp"] == ""  # the input shown empty
        r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
        assert r.status_code == 302, r.content.decode()[:2000]
        s.refresh_from_db()
        assert s.workload.parallelism["vpp"] == stored


def test_the_edit_form_shows_a_stored_vpp_and_the_input_decides(client: Any, make_user: Any, team: Any,
                                                                 catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user, vpp=4)
    login(client, user)
    html = client.get(reverse("scenario-edit", args=[s.pk])).content.decode()
    assert "Virtual pipeline stages (VPP)" in html
    posted = _submitted(html)
    assert posted["vpp"] == "4"
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "vpp": 2})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.parallelism["vpp"] == 2
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "vpp": ""})  # cleared: searched again
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.parallelism["vpp"] == "auto"


@pytest.mark.parametrize(("post", "words"), [  # engine/document/layout_checks.py
    ({"tp": 8, "pp": 1, "vpp": 2}, "interleaving (vpp"),  # no pipeline to interleave
    ({"tp": 1, "pp": 8, "vpp": 8}, "pp*vpp=64 exceeds model.layers=32"),
    # the layout search's refusal, applied at save (engine.performance.api.check_runnable)
    ({"tp": 8, "pp": 2, "vpp": 2, "framework": "deepspeed"}, "no interleaved pipeline schedule"),
])
def test_engine_refusals_at_vpp_land_beside_the_vpp_input(client: Any, make_user: Any, catalog: Any,
                                                          post: dict[str, Any], words: str) -> None:
    login(client, make_user("planner"))
    r, errors = refused_builder_post(client, {**MANUAL, "name": "refused", **post})
    assert list(errors) == ["vpp"], errors
    assert words in " ".join(errors["vpp"])
    assert words in r.content.decode()


def test_a_refused_edit_saves_nothing(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user, vpp=2)
    login(client, user)
    _r, errors = refused_builder_post(client, {**_edit_page(client, s), "pp": 8, "tp": 1, "vpp": 8},
                                      url=reverse("scenario-edit", args=[s.pk]))
    assert list(errors) == ["vpp"], errors
    s.refresh_from_db()
    assert (s.workload.parallelism["pp"], s.workload.parallelism["vpp"]) == (4, 2)


def test_a_caller_without_the_input_keeps_the_stored_vpp() -> None:
    from portal.forms.builder_sections import parallelism_section

    stored = {"tp": 2, "pp": 4, "cp": 1, "ep": 1, "vpp": 4}
    assert parallelism_section({"par_mode": "manual", "tp": 2, "pp": 4}, stored)["vpp"] == 4
    assert parallelism_section({"par_mode": "manual", "tp": 2, "pp": 4}, None)["vpp"] == "auto"
    assert parallelism_section({"par_mode": "manual", "tp": 2, "pp": 4, "vpp": None}, stored)["vpp"] == "auto"
    assert parallelism_section({"par_mode": "manual", "tp": 2, "pp": 4, "vpp": 8}, stored)["vpp"] == 8
    assert parallelism_section({"par_mode": "auto", "vpp": 8}, stored) == "auto"  # searched: no degree written


def test_initial_values_read_an_int_vpp_only() -> None:
    from portal.forms.builder import ScenarioBuilderForm

    doc = {**copy.deepcopy(DOC), "parallelism": {"tp": 2, "pp": 4, "vpp": 4}}
    assert ScenarioBuilderForm.initial_from_document(doc)["vpp"] == 4
    for vpp in ([1, 2], "auto"):
        doc["parallelism"] = {"tp": 2, "pp": 4, "vpp": vpp}
        assert "vpp" not in ScenarioBuilderForm.initial_from_document(doc)


def test_engine_errors_at_vpp_land_beside_the_input() -> None:
    """Also those the layout search raises (a framework without an interleaved schedule), not only the parser's."""
    from portal.forms.builder import ScenarioBuilderForm

    form = ScenarioBuilderForm(data={**MANUAL, "name": "x", "vpp": 2, "framework": "deepspeed"})
    assert form.is_valid(), form.errors
    form.add_path_errors({"parallelism.vpp": "2: deepspeed has no interleaved pipeline schedule"})
    assert form.errors == {"vpp": ["2: deepspeed has no interleaved pipeline schedule"]}
