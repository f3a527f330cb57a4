"""The builder's multi-head latent attention inputs (model.mla): a KV latent rank makes the model MLA and needs the
three head widths the engine's schema requires (the query latent rank is optional); every head then has its own K
and V (kv_heads = heads, refused by the engine's parser beside the input otherwise); an edit shows and keeps the stored values, emptying the inputs removes
``mla``; the DeepSeek-V3 preset fills them and its document predicts."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST, DOC, refused_builder_post
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

#: DeepSeek-V3's released config.json (arXiv 2412.19437): written out here, not read from planning.presets
V3_MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
          "v_head_dim": 128}
#: the same as builder inputs
V3_INPUTS = {"mla_q_lora_rank": 1536, "mla_kv_lora_rank": 512, "mla_qk_nope_head_dim": 128,
             "mla_qk_rope_head_dim": 64, "mla_v_head_dim": 128}
EMPTY = dict.fromkeys(V3_INPUTS, "")
#: BUILDER_POST's Llama-3-8B shape (32 heads) with latent attention: every head its own K and V
MLA_POST = {**BUILDER_POST, "kv_heads": 32, **V3_INPUTS}
REQUIRED = ("mla_qk_nope_head_dim", "mla_qk_rope_head_dim", "mla_v_head_dim")


def _saved(name: str) -> Any:
    from planning.models import Scenario

    return Scenario.objects.get(name=name)


def _stored_scenario(team: Any, user: Any) -> Any:
    from planning import services

    doc = copy.deepcopy(DOC)
    model = {**doc["model"], "name": "MLA-8B", "kv_heads": 32, "mla": dict(V3_MLA)}
    workload = services.workload_create(team=team, user=user, name="MLA-8B", model=model,
                                        training=doc["training"], parallelism=doc["parallelism"])
    return services.scenario_create(team=team, user=user, name="Latent", workload=workload,
                                    cluster=doc["cluster"], costs=doc["costs"])


# --- new scenarios -------------------------------------------------------------------------------------------
def test_posted_inputs_write_mla_and_every_head_keeps_its_kv(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**MLA_POST, "name": "latent"})
    assert r.status_code == 302, r.content.decode()[:2000]
    model = _saved("latent").workload.model
    assert model["mla"] == V3_MLA
    assert model["kv_heads"] == model["heads"] == 32
    assert "head_dim" not in model


def test_an_empty_query_latent_is_not_written(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    for name, q in (("no q latent", ""), ("q latent 0", 0)):
        r = client.post(reverse("scenario-new"), {**MLA_POST, "name": name, "mla_q_lora_rank": q})
        assert r.status_code == 302, r.content.decode()[:2000]
        assert _saved(name).workload.model["mla"] == {k: v for k, v in V3_MLA.items() if k != "q_lora_rank"}


def test_all_inputs_empty_is_standard_attention(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "standard", **EMPTY})
    assert r.status_code == 302, r.content.decode()[:2000]
    model = _saved("standard").workload.model
    assert "mla" not in model and model["kv_heads"] == 8  # grouped-query attention as given


@pytest.mark.parametrize("missing", REQUIRED)
def test_a_missing_head_width_is_refused_beside_its_input(client: Any, make_user: Any, catalog: Any,
                                                          missing: str) -> None:
    login(client, make_user("planner"))
    r, errors = refused_builder_post(client, {**MLA_POST, "name": "refused", missing: ""})
    assert list(errors) == [missing], errors
    assert errors[missing] == ["Required for multi-head latent attention."]
    assert "Required for multi-head latent attention." in r.content.decode()


def test_the_required_widths_are_the_engine_schemas() -> None:
    """The inputs refused empty are those of the keys engine.schema requires in model.mla (the KV latent rank is
    the one that makes the model MLA); the query latent rank, which the engine defaults, is not among them."""
    from engine.schema.fields import required
    from portal.forms.builder_sections import MLA_REQUIRED_INPUTS, MOE_REQUIRED_INPUTS

    assert set(required("model.mla")) == {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}
    assert set(MLA_REQUIRED_INPUTS) == {"mla_kv_lora_rank", *REQUIRED}
    assert set(MOE_REQUIRED_INPUTS) == {"moe_experts", "moe_top_k", "moe_expert_ffn"}


def test_a_kv_latent_rank_alone_needs_all_three_widths(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    _r, errors = refused_builder_post(client, {**BUILDER_POST, "name": "refused", "kv_heads": 32, **EMPTY,
                                               "mla_kv_lora_rank": 512})
    assert sorted(errors) == sorted(REQUIRED)


def test_other_kv_heads_are_refused_by_the_engine_beside_the_input(client: Any, make_user: Any,
                                                                   catalog: Any) -> None:
    """No rule of the form's own: the engine's parser refuses model.kv_heads, its message lands on the input."""
    from portal.forms.builder import ScenarioBuilderForm

    assert ScenarioBuilderForm(data={**MLA_POST, "name": "refused", "kv_heads": 8}).is_valid()
    login(client, make_user("planner"))
    r, errors = refused_builder_post(client, {**MLA_POST, "name": "refused", "kv_heads": 8})
    assert list(errors) == ["kv_heads"], errors
    text = " ".join(errors["kv_heads"])
    assert "own K and V" in text and "model.heads=32" in text  # engine/document/parse.py parse_model
    assert "own K and V" in r.content.decode()


def test_head_widths_without_a_kv_latent_rank_are_refused(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    _r, errors = refused_builder_post(client, {**MLA_POST, "name": "refused", "mla_kv_lora_rank": ""})
    assert list(errors) == ["mla_kv_lora_rank"]


# --- editing -------------------------------------------------------------------------------------------------
def test_an_edit_shows_and_keeps_them(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    stored = copy.deepcopy(s.workload.model)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert {k: posted[k] for k in V3_INPUTS} == {k: str(v) for k, v in V3_INPUTS.items()}
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.model == stored
    # another value replaces the stored one
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "mla_v_head_dim": 96})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.model["mla"] == {**V3_MLA, "v_head_dim": 96}


def test_the_inputs_decide_even_when_the_heads_change(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    """With the inputs posted, mla follows them (no longer dropped with a new head layout)."""
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "heads": 64, "kv_heads": 64})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert (s.workload.model["heads"], s.workload.model["mla"]) == (64, V3_MLA)


def test_emptying_the_inputs_removes_mla(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _stored_scenario(team, user)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    r = client.post(reverse("scenario-edit", args=[s.pk]), {**posted, **EMPTY})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert "mla" not in s.workload.model
    assert s.workload.model["kv_heads"] == 32  # as the form showed it


# --- the sections and error paths ----------------------------------------------------------------------------
def test_model_section_writes_mla_over_a_stored_head_dim() -> None:
    from portal.forms.builder_sections import model_section

    form = {"model_name": "m", "layers": 4, "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn_hidden": 14336,
            "gated_ffn": True, "vocab": 32000, "seq_len": 4096}
    base = {**form, "head_dim": 128}
    assert model_section({**form, **dict.fromkeys(V3_INPUTS)}, base)["head_dim"] == 128  # no MLA: kept
    model = model_section({**form, **V3_INPUTS}, base)
    assert model["mla"] == V3_MLA and "head_dim" not in model  # the engine refuses the two together


def test_engine_errors_on_mla_land_on_its_inputs(catalog: Any) -> None:
    from portal.forms.builder import ScenarioBuilderForm

    form = ScenarioBuilderForm(data={**MLA_POST, "name": "x"})
    assert form.is_valid(), form.errors
    form.add_path_errors({"model.mla": "bad", "model.mla.v_head_dim": "too wide", "model.mla.q_lora_rank": "no"})
    assert form.errors["mla_kv_lora_rank"] == ["bad"]
    assert form.errors["mla_v_head_dim"] == ["too wide"]
    assert form.errors["mla_q_lora_rank"] == ["no"]
    assert "heads" not in form.errors


# --- the DeepSeek-V3 preset ----------------------------------------------------------------------------------
def test_the_v3_preset_fills_the_mla_inputs_and_a_dense_one_clears_them() -> None:
    from portal.presets import preset_form_fields

    fields = preset_form_fields("deepseek-v3")
    assert {k: fields[k] for k in V3_INPUTS} == V3_INPUTS
    assert (fields["heads"], fields["kv_heads"], fields["moe_experts"], fields["moe_top_k"]) == (128, 128, 256, 8)
    assert all(preset_form_fields("llama3-70b")[k] == "" for k in V3_INPUTS)


def test_the_builder_page_has_the_inputs_and_the_presets_script_fills_them(client: Any, make_user: Any,
                                                                           catalog: Any) -> None:
    login(client, make_user("planner"))
    r = client.get(reverse("scenario-new"))
    html = r.content.decode()
    assert 'id="mla-fields"' in html
    for name in V3_INPUTS:
        assert f'name="{name}"' in html
    found = re.search(r'<script id="workload-presets"[^>]*>(.*?)</script>', html, re.S)
    assert found is not None
    presets = json.loads(found.group(1))
    assert presets["deepseek-v3"]["label"] == "DeepSeek-V3 671B (MoE, MLA)"
    assert {k: presets["deepseek-v3"]["fields"][k] for k in V3_INPUTS} == V3_INPUTS


def test_posting_the_v3_preset_stores_its_model_and_the_edit_names_the_preset(client: Any, make_user: Any,
                                                                               team: Any, catalog: Any) -> None:
    from planning.presets import PRESETS
    from portal.presets import preset_form_fields

    user = make_user("planner", team=team)
    login(client, user)
    fields = preset_form_fields("deepseek-v3")
    # the preset's fields as the page fills them: DeepSeek-V3's own degrees in manual mode (with every degree "auto"
    # the search would enumerate more layouts than it allows, and the save would refuse that)
    post = {**BUILDER_POST, **fields, "name": "v3", "preset": "deepseek-v3", "gated_ffn": "on",
            "gpu": "H800", "gpus": 2048, "precision": "fp8"}
    r = client.post(reverse("scenario-new"), post)
    assert r.status_code == 302, r.content.decode()[:2000]
    s = _saved("v3")
    assert s.workload.model == PRESETS["deepseek-v3"]["model"]
    assert s.workload.model["mla"] == V3_MLA
    par = s.workload.parallelism  # DeepSeek-V3 s.3.2.1: 16-way pipeline, 64-way expert parallelism, no TP
    assert (par["tp"], par["pp"], par["cp"], par["ep"], par["vpp"]) == (1, 16, 1, 64, "auto")
    assert "etp" not in par
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert posted["preset"] == "deepseek-v3"


def test_a_preset_that_states_its_degrees_sets_manual_mode_and_the_others_leave_them_to_the_search() -> None:
    from portal.presets import preset_form_fields

    v3 = preset_form_fields("deepseek-v3")
    assert v3["par_mode"] == "manual"
    assert {k: v3[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp")} == {"tp": 1, "pp": 16, "vpp": "", "cp": 1,
                                                                          "ep": 64, "etp": ""}
    llama = preset_form_fields("llama3-70b")
    assert llama["par_mode"] == "auto" and "pp" not in llama


def test_the_v3_preset_parses_and_predicts_near_the_published_gpu_hours() -> None:
    """On 2,048 H800 (the paper's cluster, fp8 training) the search finds a layout that fits; the predicted
    pre-training time is within 2x of the 2,664K H800 GPU hours DeepSeek-V3 reports (arXiv 2412.19437, Table 1),
    which include the batch-size ramp the preset leaves out (its one multi-token-prediction module is in)."""
    from engine.document.parse import parse_scenario
    from engine.performance.api import predict
    from planning.presets import PRESETS

    preset = PRESETS["deepseek-v3"]
    doc = {"model": copy.deepcopy(preset["model"]), "training": {**preset["training"], "precision": "fp8"},
           "parallelism": "auto",
           "cluster": {"gpu": "H800", "gpus": 2048, "gpus_per_node": 8, "nic_gbps": 400, "fabric": "infiniband",
                       "topology": "fat-tree"}}
    spec = parse_scenario(copy.deepcopy(doc))
    assert (spec.model.heads, spec.model.layers) == (128, 61)
    r = predict(doc)
    assert r.fits and 0 < r.mfu < 1
    steps = 14.8e12 / (15360 * 4096)
    gpu_hours = steps * r.step_time_s * 2048 / 3600
    assert 2.664e6 / 2 < gpu_hours < 2.664e6 * 2, gpu_hours
