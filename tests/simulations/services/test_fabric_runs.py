"""Fabric studies as a run kind (issue #13): the same claim / progress / cancel / idempotency machinery as every
run, real engine, options checked at submit time, seeds reported as progress."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def _execute(run_id: int) -> Any:
    from simulations import services

    done = services.run_execute(run_id=run_id)
    assert done is not None
    return done


def test_fabric_study_runs_the_real_simulator_end_to_end(world: dict[str, Any]) -> None:
    from simulations import services

    x = world["x"]
    run = services.run_submit(scenario=x["scenario"], user=world["users"]["planner"], kind="fabric",
                              params={"seeds": 3})
    assert run.status == "queued" and run.params == {"seeds": 3}
    done = _execute(run.pk)
    assert done.status == "succeeded", done.error
    assert done.progress == 100 and done.attempts == 1
    res = done.result
    assert [row["label"] for row in res["table"]] == ["single-QP ECMP", "8 QPs", "adaptive"]
    assert "of line rate to this 32-GPU ring all-reduce" in res["quote"]
    assert 0 < res["efficiency"]["p50"] <= 1 and res["bottleneck_tier"]
    assert res["variants"][0]["result"]["inputs"]["seeds"] == 3
    # identical submission: the stored result is reused, no second job
    again = services.run_submit(scenario=x["scenario"], user=world["users"]["planner"], kind="fabric",
                                params={"seeds": 3})
    assert again.pk == done.pk and again.reused is True  # type: ignore[attr-defined]


def test_one_routing_and_scenario_routing(world: dict[str, Any]) -> None:
    from simulations import services

    user = world["users"]["planner"]
    run = services.run_submit(scenario=world["x"]["scenario"], user=user, kind="fabric",
                              params={"routing": "ecmp", "qps": 4, "seeds": 2, "placement": "random",
                                      "ranks": 16, "traffic": "permutation"})
    done = _execute(run.pk)
    assert done.status == "succeeded", done.error
    v = done.result["variants"]
    assert len(v) == 1 and v[0]["label"] == "ecmp 4 QPs"
    assert v[0]["result"]["inputs"]["qps"] == 4 and v[0]["result"]["inputs"]["ranks"] == 16
    run = services.run_submit(scenario=world["x"]["scenario"], user=user, kind="fabric",
                              params={"routing": "scenario", "seeds": 1})
    done = _execute(run.pk)
    assert done.status == "succeeded", done.error
    assert done.result["variants"][0]["result"]["inputs"]["routing"] == "adaptive"  # the IB scenario's default


def test_progress_counts_seeds_and_cancel_stops_the_simulation(world: dict[str, Any], monkeypatch: Any) -> None:
    from simulations import services
    from simulations.models import SimulationRun

    seen: list[tuple[int, str]] = []
    real = services.fabric.study

    def watching_study(*args: Any, **kwargs: Any) -> Any:
        outer = kwargs["progress"]

        def progress(done: int, total: int) -> None:
            outer(done, total)
            row = SimulationRun.objects.get(status="running")
            seen.append((row.progress, row.progress_message))
            if done == 2:  # a user cancels while the study runs
                SimulationRun.objects.filter(pk=row.pk).update(status="cancelled", cancel_requested=True)

        return real(*args, **{**kwargs, "progress": progress})

    monkeypatch.setattr(services.fabric, "study", watching_study)
    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="fabric",
                              params={"routing": "ecmp", "seeds": 10})
    done = _execute(run.pk)
    assert seen[0][1] == "seeds 1/10" and seen[1][1] == "seeds 2/10"
    assert 30 < seen[0][0] < seen[1][0] < 100
    assert len(seen) == 2  # the third seed's progress write found the run cancelled and stopped it
    assert done.status == "cancelled" and done.result is None


@pytest.mark.parametrize(("params", "field"), [
    ({"routing": "magic"}, "params.routing"),
    ({"seeds": 0}, "params.seeds"),
    ({"seeds": 10_000}, "params.seeds"),
    ({"traffic": "broadcast"}, "params.traffic"),
    ({"traffic": ["ring-allreduce:world"]}, "params.traffic"),
    ({"placement": "best"}, "params.placement"),
    ({"fragmentation": 2}, "params.fragmentation"),
    ({"qps": 4}, "params.qps"),  # qps needs one routing mode
    ({"routing": "ecmp", "qps": True}, "params.qps"),
    ({"ranks": "all"}, "params.ranks"),
    ({"colour": "red"}, "params.colour"),
])
def test_bad_options_are_400_naming_the_field(world: dict[str, Any], api_client_for: Any, params: dict[str, Any],
                                              field: str) -> None:
    from simulations.models import SimulationRun

    client = api_client_for(world["users"]["planner"])
    r = client.post("/api/v1/runs/", {"scenario": world["x"]["scenario"].pk, "kind": "fabric", "params": params},
                    format="json")
    assert r.status_code == 400, r.content
    assert field in r.json()["errors"]
    assert SimulationRun.objects.count() == 0


def test_engine_refusal_fails_the_run_naming_the_field(world: dict[str, Any], monkeypatch: Any) -> None:
    """Refused at submit time (issue #23: nothing queued); a run that got past admission (e.g. queued before it
    existed) still fails at run time naming the field."""
    from core.errors import ValidationError
    from simulations import services
    from simulations.models import SimulationRun

    before = SimulationRun.objects.count()
    with pytest.raises(ValidationError) as refused:
        services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="fabric",
                            params={"ranks": 4096, "seeds": 1})
    assert "params.ranks" in refused.value.detail and SimulationRun.objects.count() == before
    monkeypatch.setattr("simulations.services.runs.fabric_admit", lambda **kwargs: {})
    run = services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="fabric",
                              params={"ranks": 4096, "seeds": 1})
    done = _execute(run.pk)
    assert done.status == "failed" and done.error_field == "ranks" and done.result is None


def test_api_submit_fetch_and_compare(world: dict[str, Any], api_client_for: Any) -> None:
    from simulations import services

    client = api_client_for(world["users"]["planner"])
    ids = []
    for routing in ("ecmp", "adaptive"):
        r = client.post("/api/v1/runs/", {"scenario": world["x"]["scenario"].pk, "kind": "fabric",
                                          "params": {"routing": routing, "seeds": 2}}, format="json")
        assert r.status_code == 202, r.content
        ids.append(r.json()["id"])
        services.run_execute(run_id=ids[-1])
    res = client.get(f"/api/v1/runs/{ids[0]}/result/").json()
    assert res["kind"] == "fabric" and res["result"]["variants"][0]["label"] == "ecmp"
    cmp = client.get(f"/api/v1/reports/compare/?runs={ids[0]},{ids[1]}&baseline={ids[0]}")
    assert cmp.status_code == 200, cmp.content
    assert "efficiency.p50" in cmp.content.decode()
    # another team sees none of it
    other = api_client_for(world["other_admin"])
    assert other.get(f"/api/v1/runs/{ids[0]}/").status_code == 404
    assert other.get(f"/api/v1/runs/{ids[0]}/result/").status_code == 404


def test_sweep_over_routing_placement_and_oversubscription(world: dict[str, Any], api_client_for: Any) -> None:
    from simulations.models import SimulationRun

    client = api_client_for(world["users"]["planner"])
    axes = {"params.routing": ["ecmp", "adaptive"], "params.placement": ["packed", "random"],
            "cluster.oversubscription": [1.0, 2.0]}
    r = client.post("/api/v1/sweeps/", {"scenario": world["x"]["scenario"].pk, "kind": "fabric", "axes": axes,
                                        "params": {"seeds": 2, "ranks": 16}}, format="json")
    assert r.status_code == 202, r.content
    runs = list(SimulationRun.objects.filter(sweep_id=r.json()["id"]).order_by("pk"))
    assert len(runs) == 8
    assert {(run.params["routing"], run.params["placement"], run.input_snapshot["document"]["cluster"]["oversubscription"])
            for run in runs} == {(a, b, c) for a in ("ecmp", "adaptive") for b in ("packed", "random") for c in (1.0, 2.0)}
    assert all(run.params["seeds"] == 2 and "params" not in run.input_snapshot["document"] for run in runs)
    for run in runs:
        _execute(run.pk)
    sweep = client.get(f"/api/v1/sweeps/{r.json()['id']}/").json()
    assert sweep["status"] == "succeeded" and sweep["summary"]["counts"] == {"succeeded": 8}
    assert "efficiency.p50" in sweep["summary"]["best"]
    assert all("efficiency.p50" in row["metrics"] for row in sweep["summary"]["runs"])
    bad = client.post("/api/v1/sweeps/", {"scenario": world["x"]["scenario"].pk, "kind": "fabric",
                                          "axes": {"params.routing": ["ecmp", "warp"]}}, format="json")
    assert bad.status_code == 400 and "params.routing" in bad.json()["errors"]
