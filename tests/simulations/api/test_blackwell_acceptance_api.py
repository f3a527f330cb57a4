"""Issue #22 acceptance through the API: NVFP4 on B300 and a 64-GPU job on GB300 NVL72 are saved, previewed and
priced by a tco run (real engine); NVFP4 on an H100 is a 400 naming training.precision."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.performance.test_blackwell_acceptance_cli import CASES, b300_nvfp4
from tests.simulations.api._flows import run_result, save_scenario, save_workload

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("case", "server"), [("b300-nvfp4", "HGX-B300"), ("gb300-64", "GB300-NVL72")])
def test_save_preview_and_price(world: dict[str, Any], api_client_for: Any, case: str, server: str) -> None:
    doc = CASES[case]()
    client = api_client_for(world["users"]["planner"])
    scenario_id = save_scenario(client, doc, case)
    r = client.get(f"/api/v1/scenarios/{scenario_id}/")
    r = client.get(f"/api/v1/workloads/{r.json()['workload']}/")
    assert r.status_code == 200 and r.json()["training"]["precision"] == doc["training"]["precision"], r.content

    r = client.post("/api/v1/preview/", {"scenario": scenario_id}, format="json")
    assert r.status_code == 200, r.content
    preview = r.json()
    assert preview["fits"] is True and 0.05 < preview["mfu"] < 0.9 and preview["step_time_s"] > 0, preview
    assert preview["parallelism"]["dp"] * preview["parallelism"]["tp"] == doc["cluster"]["gpus"]

    _, body = run_result(client, scenario_id, "tco")
    perf = body["performance"]
    assert perf["fits"] is True and 0.05 < perf["mfu"] < 0.9
    # the run and the preview are the same engine on the same document
    assert perf["step_time_s"] == pytest.approx(preview["step_time_s"], rel=1e-9)
    assert body["tco"]["server_model"] == server
    assert body["tco"]["capex_usd"] > 0 and body["tco"]["run_cost_usd"] > 0


def test_gb300_64_run_buys_one_rack(world: dict[str, Any], api_client_for: Any) -> None:
    client = api_client_for(world["users"]["planner"])
    _, body = run_result(client, save_scenario(client, CASES["gb300-64"](), "one rack"), "tco")
    rack = next(li for li in body["tco"]["line_items"] if "GB300-NVL72" in li["item"])
    assert rack["quantity"] == 1 and body["fabric"]["nvlink_domain_gpus"] == 64


def test_nvfp4_on_h100_preview_is_a_400_naming_training_precision(world: dict[str, Any],
                                                                   api_client_for: Any) -> None:
    doc = b300_nvfp4(gpu="H100-SXM")
    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/preview/", {"document": doc}, format="json")
    assert r.status_code == 400, r.content
    assert list(r.json()["errors"]) == ["training.precision"], r.json()
    assert "H100-SXM" in r.json()["errors"]["training.precision"][0]


def test_nvfp4_on_h100_is_refused_when_saved(world: dict[str, Any], api_client_for: Any) -> None:
    doc = b300_nvfp4(gpu="H100-SXM")
    client = api_client_for(world["users"]["planner"])
    workload = save_workload(client, doc)  # a workload alone has no GPU: the check is the scenario's
    r = client.post("/api/v1/scenarios/", {"name": "nvfp4 on hopper", "workload": workload,
                                           "cluster": doc["cluster"]}, format="json")
    assert r.status_code == 400, r.content
    assert "training.precision" in r.json()["errors"], r.json()
