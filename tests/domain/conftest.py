"""Fixtures for the planning/simulation domain tests: a loaded default catalog, a small valid scenario
per team, and a deterministic stand-in for the engine where a test is about the plumbing, not physics."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

MODEL = {
    "name": "GPT-1.7B", "layers": 24, "hidden": 2304, "heads": 24, "kv_heads": 24, "ffn_hidden": 9216,
    "gated_ffn": False, "vocab": 51200, "seq_len": 2048,
}
TRAINING = {"global_batch": 512, "micro_batch": 1, "precision": "bf16", "recompute": "full", "tokens": 3.0e11,
            "zero": 0}
PARALLELISM = {"tp": 1, "pp": 1, "dp": 32, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": False}
CLUSTER = {"gpu": "A100-80GB", "gpus": 32, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 200,
           "fabric": "infiniband", "topology": "fat-tree", "oversubscription": 1.0}


@pytest.fixture
def default_catalog(db: Any) -> Any:
    from planning import services

    return services.catalog_load_default().catalog


@pytest.fixture
def planner_user(make_user: Callable[..., Any], team: Any) -> Any:
    return make_user("planner", team)


@pytest.fixture
def world(default_catalog: Any, make_user: Callable[..., Any], team: Any, other_team: Any) -> dict[str, Any]:
    """Team X (one user per role) and team Y (an admin), each with a fleet, workload and two scenarios."""
    from planning import services

    users = {role: make_user(role, team) for role in ("viewer", "planner", "finance", "admin")}
    other_admin = make_user("admin", other_team)

    def objects(t: Any, actor: Any) -> dict[str, Any]:
        fleet = services.fleet_create(team=t, user=actor, name=f"{t.slug} pod", server_model="HGX-A100-80GB",
                                      server_count=4, nic_gbps=200, fabric="infiniband", topology="fat-tree")
        workload = services.workload_create(team=t, user=actor, name=f"{t.slug} GPT-1.7B",
                                            model=copy.deepcopy(MODEL), training=copy.deepcopy(TRAINING),
                                            parallelism=copy.deepcopy(PARALLELISM))
        scenario = services.scenario_create(team=t, user=actor, name=f"{t.slug} adhoc", workload=workload,
                                            cluster=copy.deepcopy(CLUSTER))
        fleet_scenario = services.scenario_create(team=t, user=actor, name=f"{t.slug} fleet", workload=workload,
                                                  fleet=fleet)
        catalog = services.catalog_fork(catalog=default_catalog, team=t, user=actor)
        return {"fleet": fleet, "workload": workload, "scenario": scenario, "fleet_scenario": fleet_scenario,
                "catalog": catalog}

    return {"team": team, "users": users, "other_team": other_team, "other_admin": other_admin,
            "x": objects(team, users["admin"]), "y": objects(other_team, other_admin)}


def fake_result(kind: str, document: dict[str, Any], catalog: dict[str, Any], params: Any) -> dict[str, Any]:
    """Deterministic engine stand-in: figures move with cluster size, NIC speed and GPU price."""
    cluster = document["cluster"]
    gpus = float(cluster.get("gpus", 8))
    nic = float(cluster.get("nic_gbps", 400))
    gpu_price = float((catalog.get(cluster.get("gpu", ""), {}) or {}).get("unit_price_usd") or 10000.0)
    step = 1000.0 / gpus + 40.0 / nic
    result: dict[str, Any] = {
        "step_time_s": step, "tokens_per_s": 1e6 / step, "mfu": 0.4 + nic / 10000.0,
        "time_to_train_days": step * 10, "network_wait_fraction": 4.0 / nic, "fits": True,
        "breakdown_s": {"compute": step * 0.8, "dp_comm_exposed": step * 0.2},
    }
    if kind == "tco":
        capex = gpus * gpu_price * 1.5
        result = {
            "performance": result,
            "tco": {"capex_usd": capex, "annual_tco_usd": capex / 3 + 1000, "usd_per_gpu_hour": 2.0,
                    "run_cost_usd": capex / 100, "usd_per_million_tokens": 0.5 + 1 / nic,
                    "line_items": [
                        {"category": "compute", "item": "GPU", "quantity": gpus, "unit_price_usd": gpu_price,
                         "total_usd": gpus * gpu_price, "source": "catalog"},
                        {"category": "network", "item": "=HYPERLINK(\"http://x\")", "quantity": 1,
                         "unit_price_usd": 5.0, "total_usd": 5.0, "source": "+evil"},
                    ]},
            "fabric": {"switches": {"leaf": 2, "spine": 1, "core": 0, "total": 3}},
        }
    return result


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Replace the engine call; returns the list of (kind, document) calls made."""
    from simulations import services

    calls: list[tuple[str, dict[str, Any]]] = []

    def call(kind: str, document: dict[str, Any], catalog: dict[str, Any], params: Any) -> dict[str, Any]:
        calls.append((kind, document))
        return fake_result(kind, document, catalog, params)

    monkeypatch.setattr(services.execution, "compute", call)
    return calls


@pytest.fixture
def finished_run(fake_engine: Any) -> Callable[..., Any]:
    """Submit and execute a run in-process (no broker); returns the refreshed row."""
    from simulations import services

    def _run(scenario: Any, user: Any, kind: str = "tco", force: bool = True) -> Any:
        run = services.run_submit(scenario=scenario, user=user, kind=kind, force=force)
        services.run_execute(run_id=run.pk)
        run.refresh_from_db()
        return run

    return _run
