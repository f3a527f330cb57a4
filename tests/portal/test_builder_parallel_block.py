"""The builder's 'Parallel block' input (model.parallel_block): a checked box writes the key, an unchecked one writes
nothing, an edit shows it checked and keeps it, unchecking removes it, and with experts the engine's refusal lands
beside the input (a page with the field's error, nothing saved)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, refused_builder_post, saved_model
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

MOE_INPUTS = {"moe_experts": 8, "moe_top_k": 2, "moe_expert_ffn": 14336}


def test_a_checked_box_writes_the_key_and_an_empty_one_nothing(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "parallel", "parallel_block": "on"})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert saved_model("parallel")["parallel_block"] is True
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "serial"})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert "parallel_block" not in saved_model("serial")


def test_an_edit_shows_and_keeps_it_and_unchecking_removes_it(client: Any, make_user: Any, team: Any,
                                                              scenario_for: Any) -> None:
    user = make_user("planner", team=team)
    s = scenario_for(team, user, name="Parallel", model={"parallel_block": True})
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert posted["parallel_block"] == "on"
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.model["parallel_block"] is True
    r = client.post(reverse("scenario-edit", args=[s.pk]), {k: v for k, v in posted.items() if k != "parallel_block"})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert "parallel_block" not in s.workload.model


def test_with_experts_it_is_refused_beside_the_input(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    _r, errors = refused_builder_post(client, {**BUILDER_POST, "name": "moe parallel", "parallel_block": "on",
                                              **MOE_INPUTS})
    assert list(errors) == ["parallel_block"], errors
    assert "dense models only" in " ".join(errors["parallel_block"])
