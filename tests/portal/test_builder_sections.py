"""Scenario builder: mixture-of-experts models, routing, framework, token dispatcher and every degree from the
portal, and an edit that never drops a setting the builder has no input for (portal/forms/builder_sections)."""

from __future__ import annotations

import copy
from html.parser import HTMLParser
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

MOE_MODEL = {"name": "Mixtral-8x7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
             "ffn_hidden": 14336, "gated_ffn": True, "vocab": 32000, "seq_len": 4096,
             "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 14336, "shared_experts": 1}}
MOE_TRAINING = {"global_batch": 512, "tokens": 1e12, "precision": "bf16", "recompute": "selective",
                "micro_batch": 2, "zero": 1, "attention": "flash", "framework": "megatron-core",
                "moe_dispatcher": "alltoall", "expert_kernel": "native"}
MOE_PARALLELISM = {"tp": 2, "pp": [1, 2], "cp": 1, "ep": 4, "vpp": "auto", "sequence_parallel": True}
ROCE_CLUSTER = {"gpu": "H100-SXM", "gpus": 256, "gpus_per_node": 8, "nics_per_node": 4, "nic_gbps": 400,
                "fabric": "roce", "topology": "fat-tree", "tiers": 2, "oversubscription": 1.0,
                "routing": "ecmp-qp", "qps_per_connection": 8, "switch": "SN5600"}


class _FormValues(HTMLParser):
    """What a browser submits for the builder form: enabled inputs, checked boxes and radios, selected options."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self._select: str | None = None
        self._first_option: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and "disabled" not in a:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.values[name] = a.get("value") or "on"
            elif kind != "submit":
                self.values[name] = a.get("value") or ""
        elif tag == "select" and name and "disabled" not in a:
            self._select, self._first_option = name, None
        elif tag == "option" and self._select:
            if self._first_option is None:
                self._first_option = a.get("value") or ""
                self.values.setdefault(self._select, self._first_option)
            if "selected" in a:
                self.values[self._select] = a.get("value") or ""
        elif tag == "textarea" and name:
            self._textarea = name
            self.values[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        if tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.values[self._textarea] += data.strip()


def _submitted(html: str) -> dict[str, str]:
    parser = _FormValues()
    parser.feed(html)
    return {k: v for k, v in parser.values.items() if k != "csrfmiddlewaretoken"}


def _moe_scenario(team: Any, user: Any, cluster: dict[str, Any] | None = None) -> Any:
    from planning import services

    workload = services.workload_create(team=team, user=user, name="Mixtral", model=copy.deepcopy(MOE_MODEL),
                                        training=copy.deepcopy(MOE_TRAINING),
                                        parallelism=copy.deepcopy(MOE_PARALLELISM))
    return services.scenario_create(team=team, user=user, name="Mixtral on RoCE", workload=workload,
                                    cluster=copy.deepcopy(cluster or ROCE_CLUSTER),
                                    costs={"usd_per_kwh": 0.08, "pue": 1.3})


def test_untouched_edit_keeps_every_setting(client: Any, make_user: Any, team: Any, catalog: Any) -> None:
    """Open the builder on a scenario made over the API and save what the browser submits: the MoE shape,
    head_dim, micro-batch, ZeRO, attention kernel, framework, dispatcher, expert kernel, every degree, NICs,
    tier count, switch, routing and queue pairs all survive."""
    user = make_user("planner", team=team)
    s = _moe_scenario(team, user)
    login(client, user)
    page = client.get(reverse("scenario-edit", args=[s.pk])).content.decode()
    posted = _submitted(page)
    assert posted["moe_experts"] == "8" and posted["routing"] == "ecmp-qp" and posted["framework"] == "megatron-core"
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.model == MOE_MODEL
    assert s.workload.training == MOE_TRAINING
    assert s.workload.parallelism == MOE_PARALLELISM
    assert s.cluster == ROCE_CLUSTER


def test_builder_changes_drop_only_what_they_make_stale(client: Any, make_user: Any, team: Any,
                                                        catalog: Any) -> None:
    user = make_user("planner", team=team)
    s = _moe_scenario(team, user)
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    # InfiniBand with adaptive routing, 512 GPUs: the Ethernet switch, the tier count and the QP count go
    r = client.post(reverse("scenario-edit", args=[s.pk]),
                    {**posted, "fabric": "infiniband", "routing": "adaptive", "gpus": 512, "ep": 8})
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    for gone in ("switch", "tiers", "qps_per_connection"):
        assert gone not in s.cluster
    assert (s.cluster["fabric"], s.cluster["routing"], s.cluster["gpus"], s.cluster["nics_per_node"]) == (
        "infiniband", "adaptive", 512, 4)
    assert s.workload.parallelism["ep"] == 8 and s.workload.training["micro_batch"] == 2
    # a dense preset: the MoE section goes, expert parallelism falls back to 1, head_dim goes with the shape
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    dense = {**posted, "preset": "llama3-8b", "model_name": "Llama-3-8B", "hidden": 4096, "heads": 32,
             "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256, "seq_len": 8192, "layers": 32,
             **{k: "" for k in posted if k.startswith("moe_") and k != "moe_dispatcher"}}
    r = client.post(reverse("scenario-edit", args=[s.pk]), dense)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert "moe" not in s.workload.model and s.workload.parallelism["ep"] == 1
    # routing back to the fabric default writes none
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    assert client.post(reverse("scenario-edit", args=[s.pk]), {**posted, "routing": ""}).status_code == 302
    s.refresh_from_db()
    assert "routing" not in s.cluster


def test_new_moe_scenario_from_the_builder(client: Any, make_user: Any, catalog: Any) -> None:
    from planning.models import Scenario

    login(client, make_user("planner"))
    data = {**BUILDER_POST, "name": "DeepSeekMoE on RoCE", "preset": "deepseekmoe-16b",
            "model_name": "DeepSeekMoE-16B", "layers": 28, "hidden": 2048, "heads": 16, "kv_heads": 16,
            "ffn_hidden": 10944, "vocab": 102400, "seq_len": 4096, "global_batch": 4608,
            "moe_experts": 64, "moe_top_k": 6, "moe_expert_ffn": 1408, "moe_shared_experts": 2,
            "moe_dense_layers": 1, "moe_dense_ffn": 10944, "framework": "megatron-core",
            "moe_dispatcher": "alltoall", "fabric": "roce", "routing": "ecmp", "nics_per_node": 8}
    html = client.post(reverse("scenario-preview"), data, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="estimate-result"' in html, html[:1500]
    r = client.post(reverse("scenario-new"), data)
    assert r.status_code == 302, r.content.decode()[:2000]
    s = Scenario.objects.get(name="DeepSeekMoE on RoCE")
    assert s.workload.model["moe"] == {"experts": 64, "top_k": 6, "expert_ffn_hidden": 1408, "shared_experts": 2,
                                       "dense_layers": 1, "dense_ffn_hidden": 10944}
    assert s.workload.training["framework"] == "megatron-core"
    assert s.workload.training["moe_dispatcher"] == "alltoall"
    assert s.cluster["routing"] == "ecmp" and s.cluster["fabric"] == "roce"
    # "auto" choices are not written
    r = client.post(reverse("scenario-new"), {**data, "name": "defaults", "framework": "auto",
                                              "moe_dispatcher": "auto", "routing": ""})
    assert r.status_code == 302
    d = Scenario.objects.get(name="defaults")
    assert "framework" not in d.workload.training and "moe_dispatcher" not in d.workload.training
    assert "routing" not in d.cluster


def test_gb300_nvl72_moe_end_to_end_in_the_portal(client: Any, make_user: Any, catalog: Any) -> None:
    """Rack-scale Blackwell with an MoE workload: experts parallel inside the 72-GPU NVLink domain."""
    from planning.models import Scenario

    login(client, make_user("planner"))
    data = {**BUILDER_POST, "name": "Mixtral on GB300", "preset": "mixtral-8x7b", "model_name": "Mixtral-8x7B",
            "vocab": 32000, "seq_len": 4096, "moe_experts": 8, "moe_top_k": 2, "moe_expert_ffn": 14336,
            "gpu": "GB300", "gpus": 1152, "gpus_per_node": 72, "nic_gbps": 800, "topology": "fat-tree",
            "par_mode": "manual", "tp": 1, "pp": 1, "cp": 1, "ep": 8, "global_batch": 1152}
    html = client.post(reverse("scenario-preview"), data, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="estimate-result"' in html, html[:1500]
    assert client.post(reverse("scenario-new"), data).status_code == 302
    s = Scenario.objects.get(name="Mixtral on GB300")
    assert s.workload.parallelism["ep"] == 8 and s.workload.model["moe"]["experts"] == 8
    assert (s.cluster["gpu"], s.cluster["gpus_per_node"], s.cluster["nics_per_node"]) == ("GB300", 72, 72)


@pytest.mark.parametrize("changes,field", [
    ({"moe_experts": 8, "moe_top_k": "", "moe_expert_ffn": 14336}, "moe_top_k"),
    ({"moe_experts": "", "moe_top_k": 2}, "moe_experts"),
    ({"moe_experts": 8, "moe_top_k": 9, "moe_expert_ffn": 14336}, "moe_top_k"),  # the engine's rule
    ({"par_mode": "manual", "tp": 1, "pp": 1, "cp": 1, "ep": 3, "moe_experts": 8, "moe_top_k": 2,
      "moe_expert_ffn": 14336}, "ep"),
])
def test_bad_moe_input_names_the_field(client: Any, make_user: Any, catalog: Any, changes: dict[str, Any],
                                       field: str) -> None:
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**BUILDER_POST, "name": "bad moe", **changes})
    assert r.status_code == 400
    assert field in r.context["form"].errors, r.context["form"].errors


def test_edit_preview_applies_the_pinned_study_and_calibration(make_user: Any, team: Any, catalog: Any) -> None:
    """The live estimate of an edited scenario is computed on the document a run would use: with its pinned
    fabric study and calibration, unless another fleet is picked."""
    from portal.forms.builder import ScenarioBuilderForm

    study = {"run_id": 7, "table": {"marker": True}}
    base = {"model": {}, "training": {}, "parallelism": "auto", "cluster": {}, "fleet_id": None,
            "extras": {"fabric_study": study, "calibration": {"profile": 3}}}
    form = ScenarioBuilderForm({**BUILDER_POST}, catalog_items=catalog_items(), base=base)
    assert form.is_valid(), form.errors
    doc = form.document()
    assert doc["fabric_study"] == study and doc["calibration"] == {"profile": 3}
    moved = ScenarioBuilderForm({**BUILDER_POST}, catalog_items=catalog_items(), base={**base, "fleet_id": 99})
    assert moved.is_valid(), moved.errors
    assert "fabric_study" not in moved.document() and "calibration" not in moved.document()


def catalog_items() -> list[dict[str, Any]]:
    from planning import services

    _version, values = services.catalog_resolve(catalog=None)
    return list(values.values())


def test_untouched_edit_keeps_settings_without_an_input(client: Any, make_user: Any, team: Any,
                                                        catalog: Any) -> None:
    """A scenario made over the API with a sliding attention window (model.attention_window), the all-gather form
    of context parallelism (training.cp_comm_type) and ranks in switch order (cluster.rank_assignment, which has an
    input) keeps all three through an untouched edit in the builder."""
    from planning import services

    user = make_user("planner", team=team)
    model = {**copy.deepcopy(MOE_MODEL), "attention_window": 1024}
    training = {**copy.deepcopy(MOE_TRAINING), "cp_comm_type": "all-gather"}
    cluster = {**copy.deepcopy(ROCE_CLUSTER), "rank_assignment": "topology-aware"}
    workload = services.workload_create(team=team, user=user, name="windowed", model=model, training=training,
                                        parallelism=copy.deepcopy(MOE_PARALLELISM))
    s = services.scenario_create(team=team, user=user, name="windowed", workload=workload, cluster=cluster,
                                 costs={"usd_per_kwh": 0.08, "pue": 1.3})
    login(client, user)
    posted = _submitted(client.get(reverse("scenario-edit", args=[s.pk])).content.decode())
    r = client.post(reverse("scenario-edit", args=[s.pk]), posted)
    assert r.status_code == 302, r.content.decode()[:2000]
    s.refresh_from_db()
    assert s.workload.model == model
    assert s.workload.training == training
    assert s.cluster == cluster
