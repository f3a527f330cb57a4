"""An awkward size's note reaches the stored run result, the API and the run page (issue #24 item 3): GB300 NVL72
at 2,016 GPUs (28 racks, 2⁵ × 3² × 7) with a global batch of 2,048 is forced into 63 pipeline stages."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.engine.performance.test_advice_sizing import doc

pytestmark = pytest.mark.django_db


def _scenario(client: Any, gpus: int) -> int:
    d = doc(gpus)
    r = client.post("/api/v1/workloads/", {"name": f"Llama 3 70B ({gpus})", "model": d["model"],
                                           "training": d["training"], "parallelism": d["parallelism"]},
                    format="json")
    assert r.status_code == 201, r.content
    r = client.post("/api/v1/scenarios/", {"name": f"GB300 {gpus}", "workload": r.json()["id"],
                                           "cluster": d["cluster"]}, format="json")
    assert r.status_code == 201, r.content
    return int(r.json()["id"])


def _run(client: Any, scenario_id: int, kind: str) -> tuple[int, dict[str, Any]]:
    from simulations import services

    r = client.post(f"/api/v1/scenarios/{scenario_id}/run/", {"kind": kind}, format="json")
    assert r.status_code == 202, r.content
    run = services.run_execute(run_id=r.json()["id"])
    assert run is not None and run.status == "succeeded", getattr(run, "error", None)
    r = client.get(f"/api/v1/runs/{run.pk}/result/")
    assert r.status_code == 200, r.content
    body = r.json()
    return run.pk, body.get("result", body)


def _awkward(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith("Awkward size:")]


@pytest.mark.parametrize("kind", ["predict", "tco"])
def test_the_note_reaches_the_api_and_the_run_page(world: dict[str, Any], api_client_for: Any, client: Any,
                                                    kind: str) -> None:
    planner = world["users"]["planner"]
    api = api_client_for(planner)
    run_id, result = _run(api, _scenario(api, 2016), kind)
    perf = result["performance"] if kind == "tco" else result
    assert perf["parallelism"]["pp"] == 63
    notes = _awkward(perf["notes"])
    assert len(notes) == 1, perf["notes"]
    note = notes[0]
    assert "2,016 GPUs (2⁵ × 3² × 7)" in note and "at least 63 pipeline stages" in note
    assert f"predicted MFU {perf['mfu'] * 100:.1f}%" in note
    assert "1,792 GPUs, 64 of 72 in each of 28 racks" in note and "2,304 GPUs (32 whole racks)" in note
    assert "global batch 2,016 on the same GPUs" in note

    client.force_login(planner)
    html = client.get(reverse("run-detail", args=[run_id])).content.decode()
    assert 'id="run-notes"' in html and 'id="awkward-size"' in html
    assert "2,016 GPUs (2⁵ × 3² × 7)" in html and "64 of 72 in each of 28 racks" in html


def test_a_size_that_factors_well_has_no_note(world: dict[str, Any], api_client_for: Any) -> None:
    api = api_client_for(world["users"]["planner"])
    _, result = _run(api, _scenario(api, 2304), "predict")
    assert result["parallelism"]["pp"] == 9 and _awkward(result["notes"]) == []
