"""Plan builders and checks shared by the fleet tests."""

from __future__ import annotations

from typing import Any


def one_cluster(gpus: int, gpus_per_node: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": "c0", "gpu": "H100-SXM", "gpus": gpus, "gpus_per_node": gpus_per_node, **extra}


def plan(horizon: int, clusters: list[dict[str, Any]], jobs: list[dict[str, Any]] | None = None,
         arrivals: list[dict[str, Any]] | None = None, policy: Any = "fifo", failures: Any = False,
         **extra: Any) -> dict[str, Any]:
    return {"horizon_days": horizon, "clusters": clusters, "jobs": jobs or [], "arrivals": arrivals or [],
            "policy": policy, "failures": failures, "costs": False, **extra}


def job(name: str, gpus: int, days: float, submit: float, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpus": gpus, "duration_days": days, "submit_day": submit, **extra}


def check_little(result: dict[str, Any]) -> None:
    """Little's law on the queue over [0, horizon]: mean queue length = arrival rate x mean time in queue."""
    ll = result["littles_law"]
    assert ll["queue_length_mean"] == __import__("pytest").approx(
        ll["arrival_rate_per_day"] * ll["mean_time_in_queue_days"], rel=1e-9, abs=1e-12)
