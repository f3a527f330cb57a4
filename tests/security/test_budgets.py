"""Bounded work: web requests answer 503 past their engine budget; runs stop past theirs or when cancelled."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from engine.budget import checkpoint
from tests.security.seed import seed_world

pytestmark = pytest.mark.django_db


SPIN_GUARD = 20_000  # checkpoints (>= 20 s at >= 1 ms each, 100x the budgets below): a budget that never fires
# fails the test here instead of hanging it. No test times the request: the budget itself is what must stop it.
SPINS: list[int] = []


def _spin(*_: Any, **__: Any) -> Any:
    """An engine call that does not end by itself but checks its budget like every engine loop."""
    SPINS.clear()
    for i in range(SPIN_GUARD):
        SPINS.append(i)
        checkpoint()
        time.sleep(0.001)
    raise AssertionError(f"no budget stopped the engine loop in {SPIN_GUARD} checkpoints")


@pytest.fixture
def world():
    return seed_world(execute=False)


def test_preview_past_its_budget_answers_json_503_quickly(world, settings, monkeypatch) -> None:
    import importlib

    preview_module = importlib.import_module("simulations.services.preview")  # the package re-exports the function
    settings.FP_WEB_ENGINE_BUDGET_S = 0.2
    monkeypatch.setattr(preview_module, "predict", _spin)
    client = APIClient()
    client.force_login(world.home.users["viewer"])  # preview is open to viewers: the probe's case
    client.raise_request_exception = False
    resp = client.post("/api/v1/preview/", {"scenario": world.home.scenario.pk}, format="json")
    assert resp.status_code == 503, resp.content[:300]
    body = resp.json()
    assert body["status"] == 503 and "time budget of 0.2 s" in body["errors"]["detail"][0]
    assert resp["Retry-After"] == "30"
    assert 0 < len(SPINS) < SPIN_GUARD, "the engine loop ran and its budget, not the web timeout, stopped it"


def test_the_budget_is_per_request(world, settings, monkeypatch) -> None:
    """A request after a 503 has a fresh budget (nothing leaks between requests).

    The first request's engine loop spins until its 0.2 s budget stops it; the second runs the real engine under its
    own budget. What is asserted is which budget each engine call saw, not how long anything took: the second
    request's budget is a new one (no checks spent, its own seconds, a later deadline) and none is left afterwards.
    The second request's budget is the generous test budget so that a loaded machine cannot fail it.
    """
    import importlib

    from engine import budget

    preview_module = importlib.import_module("simulations.services.preview")
    real_predict = preview_module.predict
    seen: list[tuple[budget.WorkBudget, int]] = []

    def spin_once_then_real(*args: Any, **kwargs: Any) -> Any:
        current = budget.current()
        assert current is not None, "preview's engine call runs under the request's budget"
        seen.append((current, current.checks))
        if len(seen) == 1:
            return _spin()
        return real_predict(*args, **kwargs)

    monkeypatch.setattr(preview_module, "predict", spin_once_then_real)
    client = APIClient()
    client.force_login(world.home.users["viewer"])
    client.raise_request_exception = False
    generous = settings.FP_WEB_ENGINE_BUDGET_S
    settings.FP_WEB_ENGINE_BUDGET_S = 0.2
    resp = client.post("/api/v1/preview/", {"scenario": world.home.scenario.pk}, format="json")
    assert resp.status_code == 503, resp.content[:300]
    spent, _ = seen[0]
    assert spent.checks > 0 and budget.current() is None

    settings.FP_WEB_ENGINE_BUDGET_S = generous
    resp = client.post("/api/v1/preview/", {"scenario": world.home.scenario.pk}, format="json")
    assert resp.status_code == 200, resp.content[:300]
    fresh, checks_at_entry = seen[1]
    assert fresh is not spent and checks_at_entry == 0
    assert fresh.seconds == generous and fresh.deadline is not None and spent.deadline is not None
    assert fresh.deadline > spent.deadline
    assert budget.current() is None


def test_run_past_its_budget_fails_naming_the_budget(world, settings, monkeypatch) -> None:
    from simulations import services
    from simulations.models import SimulationRun
    from simulations.services import execution

    settings.FP_RUN_BUDGET_S = 0.3
    monkeypatch.setattr(execution, "compute", _spin)
    run = services.run_submit(scenario=world.home.scenario, user=world.home.users["planner"], kind="predict",
                              force=True)
    services.run_execute(run_id=run.pk)
    run = SimulationRun.objects.get(pk=run.pk)
    assert run.status == "failed" and run.error_field == "budget", (run.status, run.error)
    assert 0 < len(SPINS) < SPIN_GUARD
    assert "exceeded its time budget of 0.3 s" in run.error


def test_cancelling_stops_a_running_engine_loop(world, settings, monkeypatch) -> None:
    """Cancellation is checked cooperatively inside the engine's loops (and renews the lease meanwhile)."""
    from simulations import services
    from simulations.models import SimulationRun
    from simulations.services import execution

    settings.FP_RUN_BUDGET_S = 60
    monkeypatch.setattr("simulations.limits.HEARTBEAT_EVERY_S", 0.05)
    calls = {"n": 0}

    def cancel_midway(*_: Any, **__: Any) -> Any:
        while calls["n"] < SPIN_GUARD:
            calls["n"] += 1
            if calls["n"] == 200:  # the owner presses cancel while the engine works
                SimulationRun.objects.filter(pk=run.pk).update(status="cancelled", cancel_requested=True)
            checkpoint()
            time.sleep(0.001)
        raise AssertionError("the cancel was never seen")

    monkeypatch.setattr(execution, "compute", cancel_midway)
    run = services.run_submit(scenario=world.home.scenario, user=world.home.users["planner"], kind="predict",
                              force=True)
    services.run_execute(run_id=run.pk)
    run = SimulationRun.objects.get(pk=run.pk)
    assert run.status == "cancelled" and run.result is None
    # The cancel is checked every HEARTBEAT_EVERY_S (0.05 s) and each pass sleeps >= 1 ms: the loop stops within
    # 0.05 / 0.001 passes of the cancel, however slow the machine (a slower pass only means fewer of them).
    assert calls["n"] - 200 <= 0.05 / 0.001 + 2, f"{calls['n'] - 200} passes after the cancel"


def test_running_engine_work_renews_the_lease(world, settings, monkeypatch) -> None:
    from simulations import services
    from simulations.models import SimulationRun
    from simulations.services import execution

    monkeypatch.setattr("simulations.limits.HEARTBEAT_EVERY_S", 0.05)
    beats = []

    def slow(*_: Any, **__: Any) -> Any:
        for _ in range(300):
            checkpoint()
            time.sleep(0.002)
            beats.append(SimulationRun.objects.values_list("heartbeat_at", flat=True).get(pk=run.pk))
        return {"step_time_s": 1.0}

    monkeypatch.setattr(execution, "compute", slow)
    run = services.run_submit(scenario=world.home.scenario, user=world.home.users["planner"], kind="predict",
                              force=True)
    services.run_execute(run_id=run.pk)
    assert len(set(beats)) >= 3, "the heartbeat (lease) advances while the engine works"
    assert SimulationRun.objects.get(pk=run.pk).status == "succeeded"


def _huge_search_document() -> dict[str, Any]:
    """Valid, in bounds, but every parallelism setting "auto" on 55,440 GPUs with an MoE: > 2 M layouts."""
    from tests.security.seed import document

    d = document()
    d["cluster"].update(gpus=55440, gpu="H100-SXM", nic_gbps=400)
    d["cluster"].pop("tiers", None)
    d["parallelism"] = "auto"
    d["model"].update(kv_heads=8, ffn_hidden=32768, heads=64, hidden=8192, layers=720, seq_len=32768,
                      moe={"experts": 64, "top_k": 2, "expert_ffn_hidden": 4096})
    d["training"].update(global_batch=720720 * 16, micro_batch="auto", recompute="auto", zero="auto")
    return d


def test_search_too_large_to_enumerate_is_refused_before_it_starts(world, monkeypatch) -> None:
    """Refused from the counts: no candidate array past the limit is built and no layout is evaluated (the time
    the refusal takes is a figure of benchmarks/bench_refusals.py)."""
    from engine.performance import api as performance_api
    from engine.schema.bounds import MAX_LAYOUTS

    counts: list[int] = []
    evaluated: list[int] = []
    real_check_work, real_evaluate = performance_api.check_work, performance_api.evaluate
    monkeypatch.setattr(performance_api, "check_work",
                        lambda what, n, *a, **k: counts.append(int(n)) or real_check_work(what, n, *a, **k))
    monkeypatch.setattr(performance_api, "evaluate",
                        lambda ctx, lay: evaluated.append(len(lay)) or real_evaluate(ctx, lay))
    client = APIClient()
    client.force_login(world.home.users["viewer"])
    resp = client.post("/api/v1/preview/", {"document": _huge_search_document()}, format="json")
    assert resp.status_code == 400, resp.content[:300]
    message = resp.json()["errors"]["parallelism"][0]
    assert "candidate layouts, more than the limit of 1,000,000" in message and "auto" in message
    assert counts and counts[-1] > MAX_LAYOUTS and all(n <= MAX_LAYOUTS for n in counts[:-1]), counts
    assert evaluated == [], "no layout was evaluated"
