"""The builder's multi-token-prediction input (model.mtp_layers): a posted depth is written to the model, an edit
shows and keeps it, emptying it removes the key, an out-of-bounds depth is refused beside its input, and presets set
or clear it (DeepSeek-V3's one module, none for Llama 3)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, refused_builder_post, saved_model
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db


def test_a_posted_depth_is_written_and_an_empty_one_is_not(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "mtp", "mtp_layers": 2})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert saved_model("mtp")["mtp_layers"] == 2
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "no mtp", "mtp_layers": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert "mtp_layers" not in saved_model("no mtp")


def test_an_edit_shows_and_keeps_the_depth_and_emptying_removes_it(client: Any, make_user: Any, team: Any,
                                                                   scenario_for: Any) -> None:
    user = make_user("planner", team=team)
    s = scenario_for(team, user, name="MTP", model={"mtp_layers": 1})
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert posted["mtp_layers"] == "1"
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.model["mtp_layers"] == 1
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "mtp_layers": ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert "mtp_layers" not in s.workload.model


def test_a_depth_beyond_the_bound_is_refused_beside_its_input(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    _r, errors = refused_builder_post(client, {**BUILDER_POST, "name": "deep", "mtp_layers": 17})
    assert list(errors) == ["mtp_layers"], errors


def test_presets_set_or_clear_the_depth() -> None:
    from portal.presets import preset_form_fields

    assert preset_form_fields("deepseek-v3")["mtp_layers"] == 1
    assert preset_form_fields("llama3-70b")["mtp_layers"] == ""
