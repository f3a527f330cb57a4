"""A sweep's children pass the save-time layout check (engine.performance.api.check_runnable) before anything is
created: a combination the framework cannot run is refused naming it; children that share their layout space (a
cost axis) are checked once, so a large cost sweep does not spend the request's engine budget on the same check."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_a_combination_the_framework_cannot_run_refuses_the_sweep(world: dict[str, Any], api_client_for: Any) -> None:
    from simulations.models import SimulationRun

    client = api_client_for(world["users"]["planner"])
    before = SimulationRun.objects.count()
    # Megatron-LM has ZeRO-3 (its FSDP) only from 2024-11 (engine/performance/frameworks.py)
    axes = {"training.framework": ["megatron-core"], "training.framework_release": ["2023-06", "2025-01"],
            "training.zero": [1, 3]}
    r = client.post("/api/v1/sweeps/", {"scenario": world["x"]["scenario"].pk, "axes": axes, "kind": "predict"},
                    format="json")
    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    text = str(errors)
    assert 'training.framework_release="2023-06"' in text and "training.zero=3" in text, text
    assert "2025-01" not in text and "training.zero=1" not in text, text  # the runnable combinations pass
    assert SimulationRun.objects.count() == before


def test_children_sharing_a_layout_space_are_checked_once(world: dict[str, Any], api_client_for: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from planning.services import documents

    calls: list[Any] = []
    real = documents.check_runnable
    monkeypatch.setattr(documents, "check_runnable", lambda spec, catalog=None: calls.append(spec) or real(spec, catalog))
    client = api_client_for(world["users"]["planner"])
    axes = {"costs.usd_per_kwh": [0.04, 0.06, 0.08, 0.1, 0.12], "cluster.nic_gbps": [200, 400]}
    r = client.post("/api/v1/sweeps/", {"scenario": world["x"]["scenario"].pk, "axes": axes, "kind": "tco"},
                    format="json")
    assert r.status_code == 202, r.content
    assert r.json()["total_runs"] == 10
    assert len(calls) == 1  # cost and link speed leave the layout space and the GPU as they were
