"""The scenario builder offers rack-scale Blackwell from the catalog: a GB300 NVL72 cluster at 800 Gb/s per GPU
is estimated live and saved; 8 GPUs per server of a rack-scale GPU is refused on the GPUs-per-server field."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from tests.portal.conftest import BUILDER_POST
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

GB300 = {**BUILDER_POST, "name": "Llama 70B on GB300 NVL72", "preset": "llama3-70b", "model_name": "Llama-3-70B",
         "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "global_batch": 1152,
         "gpu": "GB300", "gpus": 1152, "gpus_per_node": 72, "nic_gbps": 800, "topology": "fat-tree"}


def test_builder_lists_rack_scale_gpus(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    html = client.get(reverse("scenario-new")).content.decode()
    for key in ("GB200", "GB300"):
        assert re.search(rf'<option value="{key}"', html), key


def test_gb300_estimate_and_save(client: Any, make_user: Any, catalog: Any) -> None:
    from planning.models import Scenario

    login(client, make_user("planner"))
    html = client.post(reverse("scenario-preview"), GB300, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="estimate-result"' in html, html[:1500]
    mfu = re.search(r'id="est-mfu">([^<]*)<', html)
    assert mfu is not None and mfu.group(1).strip().endswith("%")
    r = client.post(reverse("scenario-new"), GB300)
    assert r.status_code == 302, r.content.decode()[:2000]
    cluster = Scenario.objects.get(name=GB300["name"]).cluster
    assert (cluster["gpu"], cluster["gpus_per_node"], cluster["nic_gbps"]) == ("GB300", 72, 800)


def test_gb300_with_eight_gpus_per_server_is_refused_on_that_field(client: Any, make_user: Any,
                                                                   catalog: Any) -> None:
    from planning.models import Scenario

    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), {**GB300, "name": "wrong", "gpus_per_node": 8})
    assert r.status_code in (200, 400)  # the form again, with the error on the field
    assert not Scenario.objects.filter(name="wrong").exists()
    assert "GB300 comes in 72-GPU NVLink domains" in r.content.decode()


def test_gb300_64_of_72_per_rack_from_the_builder(client: Any, make_user: Any, catalog: Any) -> None:
    """The builder's "GPUs used per rack" input reaches the stored document; an HGX GPU with it is refused on that
    input (the engine's error, routed to the field), and nothing is saved."""
    from planning.models import Scenario

    login(client, make_user("planner"))
    doc = {**GB300, "name": "GB300 64 of 72", "gpus": 2048, "global_batch": 1024, "gpus_per_rack": 64}
    r = client.post(reverse("scenario-new"), doc)
    assert r.status_code == 302, r.content.decode()[:2000]
    assert Scenario.objects.get(name="GB300 64 of 72").cluster["gpus_per_rack"] == 64
    edit = client.get(reverse("scenario-edit", args=[Scenario.objects.get(name="GB300 64 of 72").pk])).content.decode()
    assert re.search(r'name="gpus_per_rack"[^>]*value="64"', edit), "the edit form shows the stored value"
    bad = {**BUILDER_POST, "name": "hgx spares", "gpus_per_rack": 4}
    r = client.post(reverse("scenario-new"), bad)
    assert r.status_code in (200, 400)
    assert not Scenario.objects.filter(name="hgx spares").exists()
    assert "gpus_per_rack" in r.content.decode()


def test_expert_tp_from_the_builder(client: Any, make_user: Any, catalog: Any) -> None:
    """MoE parallel folding from the manual parallelism: the "Expert TP" input is stored as parallelism.etp."""
    from planning.models import Scenario

    login(client, make_user("planner"))
    doc = {**BUILDER_POST, "name": "folded moe", "moe_experts": 64, "moe_top_k": 8, "moe_expert_ffn": 2048,
           "par_mode": "manual", "tp": 8, "pp": 1, "cp": 1, "ep": 8, "etp": 1}
    r = client.post(reverse("scenario-new"), doc)
    assert r.status_code == 302, r.content.decode()[:3000]
    assert Scenario.objects.get(name="folded moe").workload.parallelism["etp"] == 1
