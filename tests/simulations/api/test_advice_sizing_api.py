"""An awkward size's note reaches the stored run result, the API and the run page (issue #24 item 3): GB300 NVL72
at 2,016 GPUs (28 racks, 2⁵ × 3² × 7) with a global batch of 2,048 is forced into 63 pipeline stages."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.engine.performance.test_advice_sizing import doc
from tests.simulations.api._flows import run_result, save_scenario

pytestmark = pytest.mark.django_db


def _scenario(client: Any, gpus: int) -> int:
    return save_scenario(client, doc(gpus), f"GB300 {gpus}")


def _awkward(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith("Awkward size:")]


@pytest.mark.parametrize("kind", ["predict", "tco"])
def test_the_note_reaches_the_api_and_the_run_page(world: dict[str, Any], api_client_for: Any, client: Any,
                                                    kind: str) -> None:
    planner = world["users"]["planner"]
    api = api_client_for(planner)
    run_id, result = run_result(api, _scenario(api, 2016), kind)
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
    _, result = run_result(api, _scenario(api, 2304), "predict")
    assert result["parallelism"]["pp"] == 9 and _awkward(result["notes"]) == []
