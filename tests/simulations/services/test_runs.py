"""Run lifecycle without a broker: submit → claim → execute → one stored result; idempotency, cancel,
failures, sweeps (expansion limit, aggregation), reaper, preview."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from core import errors as exceptions  # the domain raises its own errors (core.errors)

pytestmark = pytest.mark.django_db


def test_real_engine_predict_run_end_to_end(world) -> None:
    from engine.version import ENGINE_VERSION
    from simulations import services

    x = world["x"]
    run = services.run_submit(scenario=x["scenario"], user=world["users"]["planner"], kind="predict")
    assert run.status == "queued" and len(run.input_hash) == 64
    snap = run.input_snapshot
    assert snap["document"]["cluster"]["gpus"] == 32 and "A100-80GB" in snap["catalog_values"]
    assert snap["catalog"]["version_id"] is not None
    done = services.run_execute(run_id=run.pk)
    assert done.status == "succeeded", done.error
    assert done.engine_version == ENGINE_VERSION and done.progress == 100 and done.attempts == 1
    assert done.result["step_time_s"] > 0 and 0 < done.result["mfu"] < 1
    assert done.started_at and done.finished_at and done.finished_at >= done.started_at


def test_fleet_scenario_document_comes_from_fleet_and_catalog(world) -> None:
    from planning import services

    doc = services.scenario_document(scenario=world["x"]["fleet_scenario"])
    assert doc["cluster"]["gpus"] == 32 and doc["cluster"]["gpu"] == "A100-80GB"
    assert doc["cluster"]["nic_gbps"] == 200 and doc["model"]["layers"] == 24


def test_identical_input_reuses_stored_result_unless_forced(world, fake_engine, finished_run) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    x = world["x"]
    user = world["users"]["planner"]
    first = finished_run(x["scenario"], user, force=False)
    assert first.status == "succeeded" and len(fake_engine) == 1
    again = services.run_submit(scenario=x["scenario"], user=user, kind="tco")
    assert again.pk == first.pk and again.reused is True
    assert SimulationRun.objects.count() == 1 and len(fake_engine) == 1
    forced = finished_run(x["scenario"], user, force=True)
    assert forced.pk != first.pk and len(fake_engine) == 2 and forced.input_hash == first.input_hash
    # A queued duplicate (e.g. created before the first finished) copies the stored result.
    dup = services.run_create(team=x["scenario"].team, user=user, kind="tco",
                              document=first.input_snapshot["document"], version=first.catalog_version,
                              values=first.input_snapshot["catalog_values"], scenario=x["scenario"])
    services.run_execute(run_id=dup.pk)
    dup.refresh_from_db()
    assert dup.status == "succeeded" and dup.reused_from_id == first.pk and dup.result == first.result
    assert len(fake_engine) == 2


def test_hash_changes_with_catalog_values(world, fake_engine) -> None:
    from planning import services as planning
    from simulations import services

    x = world["x"]
    admin = world["users"]["admin"]
    planning.scenario_update(scenario=x["scenario"], user=admin, catalog=x["catalog"])
    a = services.run_submit(scenario=x["scenario"], user=admin, kind="tco")
    item = x["catalog"].latest_version().items.get(key="A100-80GB")
    planning.catalog_item_update(item=item, user=admin, data={"unit_price_usd": 1.0})
    b = services.run_submit(scenario=x["scenario"], user=admin, kind="tco")
    assert a.input_hash != b.input_hash and b.catalog_version.number == 2


def test_claim_is_compare_and_set(world, fake_engine) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="predict")
    token = services.run_claim(run_id=run.pk)
    assert token and services.run_claim(run_id=run.pk) is None  # second delivery: nothing to do
    assert services.run_execute(run_id=run.pk) is None
    # The lease expired (worker died): a redelivery may claim it again; the old owner can't finish.
    SimulationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=2))
    done = services.run_execute(run_id=run.pk)
    assert done.status == "succeeded" and done.attempts == 2
    assert services.execution._finish(run.pk, token, status="failed") is False
    run.refresh_from_db()
    assert run.status == "succeeded" and run.result is not None


def test_saving_an_invalid_scenario_is_refused_naming_the_field(world) -> None:
    from core.errors import ValidationError
    from planning import services as planning

    x = world["x"]
    user = world["users"]["planner"]
    before = dict(x["scenario"].cluster)
    with pytest.raises(ValidationError) as err:
        planning.scenario_update(scenario=x["scenario"], user=user, cluster={**before, "gpus": 7})
    assert "parallelism.dp" in err.value.detail
    x["scenario"].refresh_from_db()
    assert x["scenario"].cluster == before


def test_domain_error_fails_run_with_field_and_no_result(world) -> None:
    from core.errors import ValidationError
    from planning.models import Scenario
    from simulations import services
    from simulations.models import SimulationRun

    x = world["x"]
    user = world["users"]["planner"]
    # A run whose input turns invalid after it was accepted (written past validation) fails with the field.
    run = services.run_submit(scenario=x["scenario"], user=user, kind="predict")
    snapshot = copy.deepcopy(run.input_snapshot)
    snapshot["document"]["cluster"]["gpus"] = 7
    SimulationRun.objects.filter(pk=run.pk).update(input_snapshot=snapshot)
    done = services.run_execute(run_id=run.pk)
    assert done.status == "failed" and done.result is None
    assert done.error and done.error_field.startswith(("cluster", "parallelism"))
    # A scenario that became invalid after it was saved (e.g. a catalog edit) is refused at submit (#11):
    # nothing invalid reaches a worker, and no run row is written.
    Scenario.objects.filter(pk=x["scenario"].pk).update(cluster={**x["scenario"].cluster, "gpus": 7})
    x["scenario"].refresh_from_db()
    before = SimulationRun.objects.count()
    with pytest.raises(ValidationError) as err:
        services.run_submit(scenario=x["scenario"], user=user, kind="tco")
    assert any(str(f).startswith(("cluster", "parallelism")) for f in err.value.args[0])
    assert SimulationRun.objects.count() == before


def test_unexpected_error_fails_run_without_half_result(world, monkeypatch) -> None:
    from simulations import services

    def broken(*args: Any) -> dict[str, Any]:
        raise KeyError("oops")

    monkeypatch.setattr(services.execution, "compute", broken)
    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="predict")
    done = services.run_execute(run_id=run.pk)
    assert done.status == "failed" and done.result is None and "KeyError" in done.error


def test_transient_error_releases_run_for_retry(world, monkeypatch) -> None:
    from django.db import OperationalError

    from simulations import services

    def flaky(*args: Any) -> dict[str, Any]:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services.execution, "compute", flaky)
    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="predict")
    with pytest.raises(OperationalError):
        services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "queued" and run.result is None and run.attempts == 1
    assert services.run_claim(run_id=run.pk)  # the retry can claim it straight away


def test_cancel(world, fake_engine, api_client_for) -> None:
    from simulations import services

    client = api_client_for(world["users"]["planner"])
    r = client.post(f"/api/v1/scenarios/{world['x']['scenario'].pk}/run/", {"kind": "tco"}, format="json")
    assert r.status_code == 202
    run_id = r.json()["id"]
    r = client.post(f"/api/v1/runs/{run_id}/cancel/")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert services.run_execute(run_id=run_id) is None  # a late delivery does nothing
    r = client.post(f"/api/v1/runs/{run_id}/cancel/")
    assert r.status_code == 400 and "status" in r.json()["errors"]
    r = client.get(f"/api/v1/runs/{run_id}/result/")
    assert r.status_code == 409


def test_cancel_while_running_stops_without_result(world, monkeypatch) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    def cancel_midway(kind: str, document: Any, catalog: Any, params: Any) -> dict[str, Any]:
        SimulationRun.objects.filter(status="running").update(status="cancelled")
        return {"step_time_s": 1.0}

    monkeypatch.setattr(services.execution, "compute", cancel_midway)
    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="predict")
    done = services.run_execute(run_id=run.pk)
    assert done.status == "cancelled" and done.result is None


def test_api_run_status_progress_and_result(world, fake_engine, api_client_for) -> None:
    from simulations import services

    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/runs/", {"scenario": world["x"]["scenario"].pk, "kind": "tco",
                                      "params": {"monte_carlo": 10}}, format="json")
    assert r.status_code == 202, r.content
    run_id = r.json()["id"]
    status = client.get(f"/api/v1/runs/{run_id}/").json()
    assert status["status"] == "queued" and status["progress"] == 0
    services.run_execute(run_id=run_id)
    detail = client.get(f"/api/v1/runs/{run_id}/").json()
    assert detail["status"] == "succeeded" and detail["progress"] == 100 and detail["params"] == {"monte_carlo": 10}
    result = client.get(f"/api/v1/runs/{run_id}/result/").json()
    assert result["result"]["tco"]["capex_usd"] > 0
    # Re-posting the same thing returns the stored result (200, reused) instead of a new job.
    r = client.post("/api/v1/runs/", {"scenario": world["x"]["scenario"].pk, "kind": "tco",
                                      "params": {"monte_carlo": 10}}, format="json")
    assert r.status_code == 200 and r.json()["reused"] is True and r.json()["id"] == run_id
    r = client.post("/api/v1/runs/", {"scenario": world["x"]["scenario"].pk, "kind": "tco",
                                      "params": {"bogus": 1}}, format="json")
    assert r.status_code == 400 and "params.bogus" in r.json()["errors"]
    r = client.post("/api/v1/runs/", {"scenario": world["x"]["scenario"].pk, "kind": "nope"}, format="json")
    assert r.status_code == 400 and "kind" in r.json()["errors"]
    listing = client.get("/api/v1/runs/?status=succeeded&kind=tco&ordering=-finished_at").json()
    assert listing["count"] == 1


def test_sweep_expansion_limit_rejected_before_anything_is_created(world, api_client_for) -> None:
    from simulations.models import SimulationRun, Sweep

    client = api_client_for(world["users"]["planner"])
    axes = {"cluster.nic_gbps": [100, 200, 400, 800], "cluster.gpus": [8, 16, 32, 64]}
    with override_settings(FP_MAX_SWEEP_RUNS=10):
        r = client.post(f"/api/v1/scenarios/{world['x']['scenario'].pk}/sweep/", {"axes": axes}, format="json")
    assert r.status_code == 400
    assert "FP_MAX_SWEEP_RUNS=10" in r.json()["errors"]["axes"][0] and "16" in r.json()["errors"]["axes"][0]
    assert Sweep.objects.count() == 0 and SimulationRun.objects.count() == 0
    r = client.post(f"/api/v1/scenarios/{world['x']['scenario'].pk}/sweep/", {"axes": {"oops": [1]}}, format="json")
    assert r.status_code == 400 and "axes.oops" in r.json()["errors"]
    r = client.post(f"/api/v1/scenarios/{world['x']['scenario'].pk}/sweep/", {"axes": {"cluster.gpus": []}},
                    format="json")
    assert r.status_code == 400 and "axes.cluster.gpus" in r.json()["errors"]


def test_sweep_children_and_idempotent_aggregation(world, fake_engine, api_client_for) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    client = api_client_for(world["users"]["planner"])
    # A sweep with any combination the engine refuses (16 GPUs for a fixed 32-GPU layout) is refused whole at
    # submit (#11), naming the combination; no run is created.
    bad = {"cluster.nic_gbps": [200, 400, 800], "cluster.gpus": [16, 32]}
    before = SimulationRun.objects.count()
    r = client.post("/api/v1/sweeps/", {"scenario": world["x"]["scenario"].pk, "axes": bad, "kind": "tco"},
                    format="json")
    assert r.status_code == 400 and "cluster.gpus=16" in str(r.json()["errors"]["axes"])
    assert SimulationRun.objects.count() == before
    axes = {"cluster.nic_gbps": [200, 400, 800], "costs.usd_per_kwh": [0.05, 0.1]}
    r = client.post("/api/v1/sweeps/", {"scenario": world["x"]["scenario"].pk, "axes": axes, "kind": "tco"},
                    format="json")
    assert r.status_code == 202, r.content
    sweep_id = r.json()["id"]
    runs = list(SimulationRun.objects.filter(sweep_id=sweep_id).order_by("pk"))
    assert len(runs) == 6 and r.json()["total_runs"] == 6
    assert {(r.input_snapshot["document"]["cluster"]["nic_gbps"], r.input_snapshot["document"]["costs"]["usd_per_kwh"])
            for r in runs} == {(n, k) for n in (200, 400, 800) for k in (0.05, 0.1)}
    for run in runs[:3]:
        services.run_execute(run_id=run.pk)
    assert client.get(f"/api/v1/sweeps/{sweep_id}/").json()["status"] == "running"
    for run in runs[3:]:
        services.run_execute(run_id=run.pk)
        services.run_execute(run_id=run.pk)  # duplicate delivery: harmless
    sweep = client.get(f"/api/v1/sweeps/{sweep_id}/").json()
    assert sweep["status"] == "succeeded" and sweep["summary"]["counts"] == {"succeeded": 6}
    best = sweep["summary"]["best"]["tco.usd_per_million_tokens"]
    assert best["overrides"]["cluster.nic_gbps"] == 800
    assert services.sweep_refresh(sweep_id=sweep_id).summary == sweep["summary"]  # recompute = same answer
    assert client.get(f"/api/v1/runs/?sweep={sweep_id}").json()["count"] == 6


def test_reaper_requeues_stuck_runs(world, fake_engine, monkeypatch) -> None:
    from simulations import services, tasks
    from simulations.models import SimulationRun

    sent: list[int] = []
    monkeypatch.setattr(tasks.execute_run, "apply_async", lambda args, **kw: sent.append(args[0]))
    user = world["users"]["planner"]
    stuck_running = services.run_submit(scenario=world["x"]["scenario"], user=user, kind="predict")
    # A different kind: an identical document and kind would be deduplicated into the same active run (#11).
    lost_queued = services.run_submit(scenario=world["x"]["fleet_scenario"], user=user, kind="tco")
    assert lost_queued.pk != stuck_running.pk
    assert services.run_claim(run_id=stuck_running.pk)
    old = timezone.now() - timedelta(seconds=120)
    SimulationRun.objects.filter(pk__in=[stuck_running.pk, lost_queued.pk]).update(heartbeat_at=old)
    counts = services.run_reap(stuck_after_s=60)
    assert counts == {"requeued": 1, "redispatched": 1, "failed": 0}
    assert sorted(sent) == sorted([stuck_running.pk, lost_queued.pk])
    assert services.run_reap(stuck_after_s=60) == {"requeued": 0, "redispatched": 0, "failed": 0}
    for run_id in sent:
        assert services.run_execute(run_id=run_id).status == "succeeded"
    # A run that keeps dying is given up on.
    dying = services.run_submit(scenario=world["x"]["scenario"], user=user, kind="tco")
    SimulationRun.objects.filter(pk=dying.pk).update(status="running", attempts=services.MAX_ATTEMPTS,
                                                     heartbeat_at=old)
    assert services.run_reap(stuck_after_s=60)["failed"] == 1
    dying.refresh_from_db()
    assert dying.status == "failed" and "gave up" in dying.error


def test_preview_answers_and_names_bad_fields_with_their_codes(world, api_client_for) -> None:
    """How fast the preview answers is measured by ``make bench`` (benchmarks/), not asserted here."""
    from planning import services as planning

    client = api_client_for(world["users"]["viewer"])
    doc = planning.scenario_document(scenario=world["x"]["scenario"])
    r = client.post("/api/v1/preview/", {"document": doc}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    for key in ("step_time_s", "mfu", "network_wait_fraction", "time_to_train_days", "server_time_ms"):
        assert key in body
    r = client.post("/api/v1/preview/", {"scenario": world["x"]["scenario"].pk,
                                         "overrides": {"cluster.nic_gbps": 400}}, format="json")
    assert r.status_code == 200
    bad = {**doc, "cluster": {**doc["cluster"], "gpus": -5}}
    r = client.post("/api/v1/preview/", {"document": bad}, format="json")
    assert r.status_code == 400
    body = r.json()
    assert "cluster.gpus" in body["errors"]
    # the engine's machine code travels beside the message, one code per message
    assert body["codes"]["cluster.gpus"] == ["out_of_range"]
    # a GPU count no layout can use: decided by its code, not its wording
    odd = {**doc, "cluster": {**doc["cluster"], "gpus": 8 * 97}, "parallelism": {"tp": 8, "pp": 2}}
    r = client.post("/api/v1/preview/", {"document": odd}, format="json")
    assert r.status_code == 400, r.content
    codes = {c for field_codes in r.json()["codes"].values() for c in field_codes}
    assert codes & {"layout_conflict", "no_layout"}, r.json()
    r = client.post("/api/v1/preview/", {}, format="json")
    assert r.status_code == 400 and "document" in r.json()["errors"]
    assert r.json()["codes"]["document"] == ["invalid"]


def test_service_validation_errors_name_fields(world) -> None:
    from simulations import services

    with pytest.raises(exceptions.ValidationError) as err:
        services.run_submit(scenario=world["x"]["scenario"], user=None, kind="tco", params={"monte_carlo": -1})
    assert "params.monte_carlo" in err.value.detail
