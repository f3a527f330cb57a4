"""The builder's sliding-window inputs (model.attention_window, model.global_attention_every): posted values are
written to the model, an edit shows and keeps them, emptying an input removes its key, the engine's refusal of a
global interval without a window lands beside its input, and a preset that states neither clears both."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, refused_builder_post, saved_model
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

WINDOW = {"attention_window": 1024, "global_attention_every": 6}


def test_the_inputs_write_their_keys_and_empty_ones_nothing(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "windowed", **WINDOW})
    assert r.status_code == 302, r.content.decode()[:2000]
    model = saved_model("windowed")
    assert (model["attention_window"], model["global_attention_every"]) == (1024, 6)
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "full", "attention_window": "",
                                              "global_attention_every": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert not set(WINDOW) & set(saved_model("full"))


def test_an_edit_shows_and_keeps_them_and_emptying_removes_them(client: Any, make_user: Any, team: Any,
                                                                scenario_for: Any) -> None:
    user = make_user("planner", team=team)
    s = scenario_for(team, user, name="Windowed", model=WINDOW)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert (posted["attention_window"], posted["global_attention_every"]) == ("1024", "6")
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert {k: s.workload.model.get(k) for k in WINDOW} == WINDOW
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "attention_window": "",
                                                            "global_attention_every": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert not set(WINDOW) & set(s.workload.model)


def test_a_global_interval_without_a_window_is_refused_beside_its_input(client: Any, make_user: Any,
                                                                         catalog: Any) -> None:
    login(client, make_user("planner"))
    _r, errors = refused_builder_post(client, {**BUILDER_POST, "name": "no window", "global_attention_every": 4})
    assert list(errors) == ["global_attention_every"], errors
    assert "needs model.attention_window" in " ".join(errors["global_attention_every"])


def test_a_preset_that_states_no_window_clears_the_inputs() -> None:
    from portal.presets import preset_form_fields

    fields = preset_form_fields("llama3-70b")
    assert (fields["attention_window"], fields["global_attention_every"], fields["parallel_block"]) == ("", "", False)
