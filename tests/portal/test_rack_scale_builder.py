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
