"""Request sequences the API tests share: a workload from an engine document, a scenario on it, a run executed in
the test's process (services.run_execute, the worker's own entry point) and its stored result."""

from __future__ import annotations

from typing import Any


def save_workload(client: Any, doc: dict[str, Any], name: str = "workload") -> int:
    """POST the document's model / training / parallelism as a workload; its id."""
    r = client.post("/api/v1/workloads/", {"name": name, "model": doc["model"], "training": doc["training"],
                                           "parallelism": doc["parallelism"]}, format="json")
    assert r.status_code == 201, r.content
    return int(r.json()["id"])


def save_scenario(client: Any, doc: dict[str, Any], name: str = "scenario") -> int:
    """A workload and a scenario on the document's cluster; the scenario's id."""
    r = client.post("/api/v1/scenarios/", {"name": name, "workload": save_workload(client, doc, name),
                                           "cluster": doc["cluster"]}, format="json")
    assert r.status_code == 201, r.content
    return int(r.json()["id"])


def run_result(client: Any, scenario_id: int, kind: str = "tco") -> tuple[int, dict[str, Any]]:
    """Submit a run of the scenario, execute it (it must succeed); the run's id and its stored result."""
    from simulations import services

    r = client.post(f"/api/v1/scenarios/{scenario_id}/run/", {"kind": kind}, format="json")
    assert r.status_code == 202, r.content
    run = services.run_execute(run_id=r.json()["id"])
    assert run is not None and run.status == "succeeded", getattr(run, "error", None)
    r = client.get(f"/api/v1/runs/{run.pk}/result/")
    assert r.status_code == 200, r.content
    body: dict[str, Any] = r.json()
    result: dict[str, Any] = body.get("result", body)
    return run.pk, result
