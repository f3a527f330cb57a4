"""The builder's inputs for partial full recomputation (training.recompute_layers), the FFN activation cache format
(training.activation_cache), Adam's moment format (training.optimizer_moments) and how context parallelism moves
K and V (training.cp_comm_type): posted values are written to the
scenario, an edit shows and keeps them, emptying an input removes its key, and the combinations the engine's parser
refuses are refused beside the input with its message (a page with the field's error, nothing saved)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, DOC, refused_builder_post
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

FORMATS = {"recompute_layers": 5, "activation_cache": "fp8", "optimizer_moments": "bf16",
           "cp_comm_type": "all-gather"}
#: FP8 with full recomputation: every format setting is valid on an H100
FP8_FULL = {**BUILDER_POST, "precision": "fp8", "recompute": "full"}


def _saved(name: str) -> Any:
    from planning.models import Scenario

    return Scenario.objects.get(name=name)


def _stored_scenario(team: Any, user: Any) -> Any:
    from planning import services

    doc = copy.deepcopy(DOC)
    training = {**doc["training"], "precision": "fp8", "recompute": "full", **FORMATS}
    workload = services.workload_create(team=team, user=user, name=doc["model"]["name"], model=doc["model"],
                                        training=training, parallelism=doc["parallelism"])
    return services.scenario_create(team=team, user=user, name="Formats", workload=workload,
                                    cluster=doc["cluster"], costs=doc["costs"])


@pytest.mark.parametrize("key,value", list(FORMATS.items()))
def test_each_input_writes_its_key(client: Any, make_user: Any, catalog: Any, key: str, value: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**FP8_FULL, "name": f"with {key}", key: value})
    assert r.status_code == 302, r.content.decode()[:2000]
    training = _saved(f"with {key}").workload.training
    assert training[key] == value
    assert not {k for k in FORMATS if k != key} & set(training)  # the other (empty) inputs write nothing


def test_empty_inputs_write_no_key(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**FP8_FULL, "name": "defaults", "recompute_layers": "",
                                              "activation_cache": "", "optimizer_moments": "", "cp_comm_type": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert not set(FORMATS) & set(_saved("defaults").workload.training)


def test_an_edit_shows_and_keeps_them(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert (posted["recompute_layers"], posted["activation_cache"], posted["optimizer_moments"],
            posted["cp_comm_type"]) == ("5", "fp8", "bf16", "all-gather")
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert {k: s.workload.training.get(k) for k in FORMATS} == FORMATS
    # another value replaces the stored one
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "recompute_layers": 3})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.training["recompute_layers"] == 3


def test_emptying_an_input_removes_its_key(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    r = client.post(reverse("scenario-edit", args=[s.pk]),
                    {**posted, "recompute_layers": "", "activation_cache": "", "optimizer_moments": "",
                     "cp_comm_type": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert not set(FORMATS) & set(s.workload.training)
    assert (s.workload.training["precision"], s.workload.training["recompute"]) == ("fp8", "full")


#: (changes, input, a word of the engine parser's refusal: engine/document/parse.py _recompute_layers / _activation_cache)
ENGINE_REFUSED = [
    ({"recompute": "selective", "recompute_layers": 4}, "recompute_layers", "needs training.recompute full"),
    ({"recompute": "auto", "recompute_layers": 4}, "recompute_layers", "needs training.recompute full"),
    ({"precision": "bf16", "activation_cache": "fp8"}, "activation_cache", "mxfp8"),
    # all-to-all CP at TP 8: each rank's one KV head (of 8) cannot split over 2 CP ranks (engine/performance/api.py)
    ({"par_mode": "manual", "tp": 8, "pp": 1, "cp": 2, "cp_comm_type": "a2a"}, "cp_comm_type", "Ulysses"),
]


@pytest.mark.parametrize("changes,field,words", ENGINE_REFUSED)
def test_the_engine_refuses_invalid_combinations_beside_the_input(client: Any, make_user: Any, catalog: Any,
                                                                  changes: dict[str, Any], field: str,
                                                                  words: str) -> None:
    """The form passes them on; the engine's parser refuses the document and its message lands on the input."""
    from portal.forms import ScenarioBuilderForm

    form = ScenarioBuilderForm({**FP8_FULL, "name": "refused", **changes})
    assert form.is_valid(), form.errors  # no rule of the form's own
    login(client, make_user("planner"))
    r, errors = refused_builder_post(client, {**FP8_FULL, "name": "refused", **changes})  # errors beside the fields
    assert list(errors) == [field], errors
    assert words in " ".join(errors[field])
    assert words in r.content.decode().replace("&#x27;", "'")


def test_more_layers_than_the_model_are_refused_by_the_form(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    _r, errors = refused_builder_post(client, {**FP8_FULL, "name": "refused", "recompute_layers": 33})
    assert list(errors) == ["recompute_layers"], errors
    assert "layers (32)" in " ".join(errors["recompute_layers"])  # BUILDER_POST's model has 32 layers


@pytest.mark.parametrize("field,value", [
    ("recompute_layers", "abc"), ("recompute_layers", "9" * 40), ("recompute_layers", "0"), ("recompute_layers", "2.5"),
    ("activation_cache", "fp4"), ("activation_cache", "<script>"), ("optimizer_moments", "fp16"),
    ("optimizer_moments", "auto"),
])
def test_hostile_values_are_refused_naming_the_input(client: Any, make_user: Any, catalog: Any, field: str,
                                                     value: str) -> None:
    login(client, make_user("planner"))
    _r, errors = refused_builder_post(client, {**FP8_FULL, "name": "hostile", field: value})
    assert field in errors


def test_an_edit_that_leaves_full_recomputation_must_clear_the_layers(client: Any, make_user: Any, team: Any,
                                                                      catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "recompute": "selective"})
    assert r.status_code == 400
    assert "needs training.recompute full" in " ".join(r.context["form"].errors["recompute_layers"])
    s.refresh_from_db()
    assert s.workload.training["recompute"] == "full" and s.workload.training["recompute_layers"] == 5
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "recompute": "selective", "recompute_layers": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.training["recompute"] == "selective" and "recompute_layers" not in s.workload.training


def test_choices_are_the_engine_enums_and_engine_errors_land_on_the_inputs() -> None:
    from engine.schema.enums import ActivationCache, OptimizerMoments
    from portal.forms import ScenarioBuilderForm

    form = ScenarioBuilderForm()
    for name, enum in (("activation_cache", ActivationCache), ("optimizer_moments", OptimizerMoments)):
        choices = list(form.fields[name].choices)  # type: ignore[attr-defined]
        assert choices[0][0] == "" and choices[1:] == enum.choices()
    bound = ScenarioBuilderForm({**BUILDER_POST})
    assert bound.is_valid(), bound.errors
    bound.add_path_errors({f"training.{k}": ["engine says no"] for k in FORMATS})
    assert {k: bound.errors.get(k) for k in FORMATS} == {k: ["engine says no"] for k in FORMATS}
