"""Fair share and de-duplication (issue #23): a team holds at most FP_TEAM_MAX_ACTIVE_RUNS queued or running runs
(more answers 429 with Retry-After, nothing written), sweeps and replication fan-outs are created once per
Idempotency-Key and once per identical input while active. The concurrent versions (30 threads on PostgreSQL) are
in tests/integration/test_concurrent_sweeps.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db

AXES = {"cluster.nic_gbps": [200, 400]}


def _counts() -> tuple[int, int]:
    from simulations.models import SimulationRun, Sweep

    return SimulationRun.objects.count(), Sweep.objects.count()


def _sweep(client: Any, scenario: Any, axes: dict[str, Any] | None = None, **headers: str) -> Any:
    return client.post(f"/api/v1/scenarios/{scenario.pk}/sweep/", {"kind": "tco", "axes": axes or AXES},
                       format="json", **headers)


def test_a_team_past_its_share_gets_429_with_retry_after_and_nothing_is_written(
        world: dict[str, Any], api_client_for: Any) -> None:
    client = api_client_for(world["users"]["planner"])
    scenario = world["x"]["scenario"]
    with override_settings(FP_TEAM_MAX_ACTIVE_RUNS=3, FP_ADMISSION_RETRY_AFTER_S=42):
        assert _sweep(client, scenario).status_code == 202  # 2 active
        before = _counts()
        resp = _sweep(client, scenario, {"cluster.nic_gbps": [100, 800]})  # 2 more: 4 > 3
        assert resp.status_code == 429, resp.content
        assert resp["Retry-After"] == "42" and "FP_TEAM_MAX_ACTIVE_RUNS=3" in resp.json()["errors"]["detail"][0]
        assert _counts() == before
        resp = client.post(f"/api/v1/scenarios/{scenario.pk}/run/", {"kind": "tco"}, format="json")
        assert resp.status_code == 202  # one more fits: 3
        resp = client.post(f"/api/v1/scenarios/{scenario.pk}/run/", {"kind": "tco", "params": {"seed": 1}},
                           format="json")
        assert resp.status_code == 429
        # an identical run still answers (it adds nothing), and another team is not held back by this one
        again = client.post(f"/api/v1/scenarios/{scenario.pk}/run/", {"kind": "tco"}, format="json")
        assert again.status_code == 200 and again.json()["reused"] is True
        other = api_client_for(world["other_admin"])
        assert other.post(f"/api/v1/scenarios/{world['y']['scenario'].pk}/run/", {"kind": "tco"},
                          format="json").status_code == 202


def test_identical_sweeps_while_active_make_one_sweep(world: dict[str, Any], api_client_for: Any) -> None:
    from simulations import services

    client = api_client_for(world["users"]["planner"])
    scenario = world["x"]["scenario"]
    first = _sweep(client, scenario)
    assert first.status_code == 202 and first.json()["reused"] is False
    before = _counts()
    second = _sweep(client, scenario)
    assert second.status_code == 200 and second.json()["reused"] is True
    assert second.json()["id"] == first.json()["id"] and _counts() == before
    assert _sweep(client, scenario, {"cluster.nic_gbps": [400, 200]}).status_code == 202  # other input: a new sweep
    # once it is no longer active, the same input is a new sweep
    from simulations.models import Sweep

    services.sweep_cancel(sweep=Sweep.objects.get(pk=first.json()["id"]), user=world["users"]["planner"])
    third = _sweep(client, scenario)
    assert third.status_code == 202 and third.json()["id"] != first.json()["id"]


def test_idempotency_key_answers_the_first_sweep_even_after_it_finished(
        world: dict[str, Any], api_client_for: Any) -> None:
    from simulations import services
    from simulations.models import Sweep

    client = api_client_for(world["users"]["planner"])
    scenario = world["x"]["scenario"]
    first = _sweep(client, scenario, HTTP_IDEMPOTENCY_KEY="retry-me-1")
    assert first.status_code == 202
    services.sweep_cancel(sweep=Sweep.objects.get(pk=first.json()["id"]), user=world["users"]["planner"])
    before = _counts()
    retry = _sweep(client, scenario, HTTP_IDEMPOTENCY_KEY="retry-me-1")
    assert retry.status_code == 200 and retry.json()["id"] == first.json()["id"] and retry.json()["reused"]
    assert _counts() == before
    clash = _sweep(client, scenario, {"cluster.nic_gbps": [800]}, HTTP_IDEMPOTENCY_KEY="retry-me-1")
    assert clash.status_code == 409 and "Idempotency-Key" in clash.json()["errors"]["detail"][0]
    assert _counts() == before
    bad = _sweep(client, scenario, HTTP_IDEMPOTENCY_KEY="é" * 3)
    assert bad.status_code == 400 and "Idempotency-Key" in bad.json()["errors"]
    # keys are per user and team: another user's same key is another request
    other = api_client_for(world["users"]["admin"])
    assert _sweep(other, scenario, {"cluster.nic_gbps": [800]}, HTTP_IDEMPOTENCY_KEY="retry-me-1").status_code == 202


def test_replication_fan_outs_are_deduplicated_too(world: dict[str, Any], api_client_for: Any) -> None:
    from planning.services.capacity_plans import capacity_plan_create
    from tests.security.seed import CAPACITY_PLAN

    plan = capacity_plan_create(team=world["team"], user=world["users"]["planner"], name="P",
                                document=dict(CAPACITY_PLAN))
    client = api_client_for(world["users"]["planner"])
    url = f"/api/v1/capacity-plans/{plan.pk}/replicate/"
    first = client.post(url, {"replications": 20, "chunk": 5}, format="json")
    assert first.status_code == 202 and first.json()["runs"] == 4
    before = _counts()
    again = client.post(url, {"replications": 20, "chunk": 5}, format="json")
    assert again.status_code == 200 and again.json()["sweep"] == first.json()["sweep"] and again.json()["reused"]
    keyed = client.post(url, {"replications": 20, "chunk": 5}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert keyed.json()["sweep"] == first.json()["sweep"]
    assert _counts() == before
    with override_settings(FP_TEAM_MAX_ACTIVE_RUNS=5):
        resp = client.post(url, {"replications": 10, "chunk": 5}, format="json")  # 4 active + 2 > 5
    assert resp.status_code == 429 and "Retry-After" in resp and _counts() == before


def test_a_sweep_over_the_child_limit_writes_no_rows(world: dict[str, Any], api_client_for: Any) -> None:
    client = api_client_for(world["users"]["planner"])
    before = _counts()
    with override_settings(FP_MAX_SWEEP_RUNS=3):
        resp = _sweep(client, world["x"]["scenario"], {"cluster.nic_gbps": [100, 200, 400, 800]})
    assert resp.status_code == 400 and "FP_MAX_SWEEP_RUNS=3" in resp.json()["errors"]["axes"][0]
    assert _counts() == before
