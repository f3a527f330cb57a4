"""Issue #22 acceptance through the portal: the scenario builder saves Llama-3-70B in NVFP4 on 64 B300 and a 64-GPU
job on GB300 NVL72 (less than one rack); the live estimate and the run page show step time and MFU (with the
model's 80% intervals), and NVFP4 shows by its label; NVFP4 on an H100 is refused by the live estimate and by the
save (engine.performance.api.check_runnable at save time)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from engine.schema.enums import Precision
from tests.portal.conftest import BUILDER_POST, refused_builder_post
from tests.portal.test_builder_sections import _submitted
from tests.portal.test_pages import login

pytestmark = pytest.mark.django_db

LLAMA_70B = {**BUILDER_POST, "preset": "llama3-70b", "model_name": "Llama-3-70B", "layers": 80, "hidden": 8192,
             "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "global_batch": 512, "par_mode": "manual", "tp": 8,
             "pp": 1, "cp": 1, "ep": 1, "recompute": "selective", "gpus": 64}
CASES = {
    "b300-nvfp4": {**LLAMA_70B, "name": "Llama 70B NVFP4 on 64 B300", "precision": "nvfp4", "gpu": "B300",
                   "gpus_per_node": 8, "nic_gbps": 800},
    "gb300-64": {**LLAMA_70B, "name": "Llama 70B on 64 GB300", "precision": "fp8", "gpu": "GB300",
                 "gpus_per_node": 72, "nic_gbps": 800, "topology": "fat-tree"},
}
SERVERS = {"b300-nvfp4": "HGX-B300", "gb300-64": "GB300-NVL72"}
NVFP4_LABEL = Precision.label(Precision.NVFP4)  # defined once with the value (engine.schema.enums)
PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


def _percent(text: str) -> float:
    m = PERCENT.search(text)
    assert m is not None, text
    return float(m.group(1)) / 100


def _selected(html: str, name: str) -> str:
    """The label of the selected option of the select ``name``."""
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
    assert select is not None, name
    option = re.search(r'<option value="[^"]*"[^>]*\bselected\b[^>]*>([^<]*)<', select.group(1))
    assert option is not None, select.group(1)[:500]
    return option.group(1).strip()


def test_builder_offers_nvfp4_by_its_label(client: Any, make_user: Any, catalog: Any) -> None:
    assert NVFP4_LABEL.startswith("NVFP4")  # a label, not the raw value
    login(client, make_user("planner"))
    html = client.get(reverse("scenario-new")).content.decode()
    assert re.search(rf'<option value="nvfp4"[^>]*>{re.escape(NVFP4_LABEL)}</option>', html)
    for gpu in ("B300", "GB300"):
        assert re.search(rf'<option value="{gpu}"', html), gpu


@pytest.mark.parametrize("case", CASES)
def test_live_estimate_fits_with_step_time_and_mfu(client: Any, make_user: Any, catalog: Any, case: str) -> None:
    login(client, make_user("planner"))
    html = client.post(reverse("scenario-preview"), CASES[case], HTTP_HX_REQUEST="true").content.decode()
    assert 'id="estimate-result"' in html and 'id="estimate-errors"' not in html, html[:1500]
    assert "Does not fit" not in html
    step = re.search(r'data-step-time="([^"]+)"', html)
    assert step is not None and float(step.group(1)) > 0
    mfu = re.search(r'id="est-mfu">([^<]*)<', html)
    assert mfu is not None and 0.05 < _percent(mfu.group(1)) < 0.9, mfu


@pytest.mark.parametrize("case", CASES)
def test_saved_and_run_shows_the_figures(client: Any, make_user: Any, catalog: Any, case: str) -> None:
    from planning.models import Scenario
    from simulations import services
    from simulations.models import SimulationRun

    post = CASES[case]
    login(client, make_user("planner"))
    r = client.post(reverse("scenario-new"), post)
    assert r.status_code == 302, r.content.decode()[:2000]
    scenario = Scenario.objects.get(name=post["name"])
    assert scenario.workload.training["precision"] == post["precision"]
    assert (scenario.cluster["gpu"], scenario.cluster["gpus"]) == (post["gpu"], 64)

    r = client.post(reverse("scenario-run", args=[scenario.pk]), {"kind": "tco"})
    assert r.status_code == 302, r.content.decode()[:2000]
    run = SimulationRun.objects.get(scenario=scenario)
    done = services.run_execute(run_id=run.pk)
    assert done is not None and done.status == "succeeded", getattr(done, "error", None)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="run-results"' in html and 'id="fit-warning"' not in html
    figures = dict(re.findall(r"<dt>([^<]+)</dt><dd[^>]*>(.*?)</dd>", html, re.S))
    assert "Step time" in figures and "MFU" in figures, list(figures)
    assert 0.05 < _percent(figures["MFU"]) < 0.9, figures["MFU"]
    for label in ("Step time", "MFU"):
        assert "(80%:" in figures[label], (label, figures[label])
    items = re.search(r'id="line-items">(.*?)</table>', html, re.S)
    assert items is not None and SERVERS[case] in items.group(1)  # priced: a line item for the servers


def test_saved_nvfp4_shows_its_label(client: Any, make_user: Any, catalog: Any) -> None:
    """The scenario page and the edit form name the precision by NVFP4's label, and an untouched edit keeps it."""
    from planning.models import Scenario

    post = CASES["b300-nvfp4"]
    login(client, make_user("planner"))
    assert client.post(reverse("scenario-new"), post).status_code == 302
    scenario = Scenario.objects.get(name=post["name"])
    page = client.get(reverse("scenario-detail", args=[scenario.pk])).content.decode()
    shown = re.search(r'id="scenario-precision">([^<]*)<', page)
    assert shown is not None and shown.group(1) == NVFP4_LABEL, shown
    edit = client.get(reverse("scenario-edit", args=[scenario.pk])).content.decode()
    assert _selected(edit, "precision") == NVFP4_LABEL
    r = client.post(reverse("scenario-edit", args=[scenario.pk]), _submitted(edit))
    assert r.status_code == 302, r.content.decode()[:2000]
    scenario.refresh_from_db()
    assert scenario.workload.training["precision"] == "nvfp4"


def test_nvfp4_on_h100_is_refused_in_the_live_estimate(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    post = {**CASES["b300-nvfp4"], "gpu": "H100-SXM", "nic_gbps": 400}
    html = client.post(reverse("scenario-preview"), post, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="estimate-errors"' in html and 'id="estimate-result"' not in html
    assert "nvfp4" in html and "H100-SXM" in html


def test_nvfp4_on_h100_is_refused_when_saved(client: Any, make_user: Any, catalog: Any) -> None:
    login(client, make_user("planner"))
    post = {**CASES["b300-nvfp4"], "name": "nvfp4 on hopper", "gpu": "H100-SXM", "nic_gbps": 400}
    _, errors = refused_builder_post(client, post)
    assert "precision" in errors, errors
