"""Run leases and heartbeats (issue #23): the rules with explicit timestamps and a fake clock, no waiting.

* a lease lapses exactly ``FP_RUN_LEASE_S`` after the last renewal;
* a claim is a compare-and-set: a live lease refuses a second claim, a lapsed one is taken over once, and the old
  execution's renewals and final write then match nothing;
* the heartbeat counts a refused renewal as a lost claim at once, and failed renewals only once a whole lease
  passed without a good one;
* an execution that lost its claim stops at its next checkpoint and writes nothing;
* the heartbeat thread renews the lease while the engine never reaches a checkpoint;
* the reaper re-queues lapsed leases, and re-sends queued runs only when the broker lost their messages.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from simulations.services.leases import Heartbeat, lease_lapsed

pytestmark = pytest.mark.django_db


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_lease_lapses_exactly_one_lease_after_the_last_renewal() -> None:
    beat = timezone.now()
    assert not lease_lapsed(beat, now=beat + timedelta(seconds=30), lease_s=30)
    assert lease_lapsed(beat, now=beat + timedelta(seconds=30, microseconds=1), lease_s=30)
    assert lease_lapsed(None, now=beat, lease_s=30)


def test_heartbeat_loses_the_claim_when_a_renewal_matches_nothing() -> None:
    answers = [True, True, False, True]
    lost: list[str] = []
    clock = FakeClock()
    hb = Heartbeat(renew=lambda: answers.pop(0), lease_s=30, every_s=10, clock=clock, on_lost=lost.append)
    clock.t += 10
    assert hb.due_in() == 0
    assert hb.beat() and hb.last_ok == clock.t and hb.due_in() == 10
    clock.t += 4
    assert hb.beat() and hb.beats == 2
    assert not hb.beat() and hb.lost and hb.cancelled()  # cancelled: the work budget's callback says stop
    assert not hb.beat()  # once lost, never renewed again (the 4th answer is never asked for)
    assert answers == [True] and len(lost) == 1 and "another execution" in lost[0]


def test_failed_renewals_lose_the_claim_only_after_a_whole_lease() -> None:
    clock = FakeClock()

    def broken() -> bool:
        raise ConnectionError("database unreachable")

    hb = Heartbeat(renew=broken, lease_s=30, every_s=10, clock=clock)
    for step in (10, 10, 9.9):
        clock.t += step
        assert hb.beat(), "still within the lease: another worker cannot claim it yet"
        assert hb.failed_last
    clock.t += 0.1  # 30 s without a good renewal: another worker may hold the claim by now
    assert not hb.beat() and hb.lost and "30 s" in hb.reason


def test_checkpoint_renewals_raise_database_errors_for_the_run_to_retry() -> None:
    clock = FakeClock()

    def broken() -> bool:
        raise ConnectionError("database unreachable")

    hb = Heartbeat(renew=broken, lease_s=30, every_s=10, clock=clock)
    with pytest.raises(ConnectionError):
        hb.cancelled()  # the engine's checkpoint: the error reaches the run protocol (release + retry)
    assert not hb.lost


def test_a_stopped_heartbeat_does_not_report_the_run_it_finished_as_lost() -> None:
    lost: list[str] = []
    hb = Heartbeat(renew=lambda: False, lease_s=30, every_s=10, clock=FakeClock(), on_lost=lost.append)
    hb.stop()  # the execution is writing its own end
    assert not hb.beat() and lost == []


def test_the_heartbeat_thread_renews_until_stopped() -> None:
    renewed = threading.Event()
    calls: list[int] = []

    def renew() -> bool:
        calls.append(1)
        if len(calls) >= 3:
            renewed.set()
        return True

    hb = Heartbeat(renew=renew, lease_s=0.3, every_s=0.01, what="test")
    hb.start()
    assert renewed.wait(30), "the thread renews on its own"
    hb.stop()
    assert not hb.running and not hb.lost
    n = len(calls)
    hb.stop()  # idempotent
    assert len(calls) == n


# --- the claim -----------------------------------------------------------------------------------------------
def _run(world: Any) -> Any:
    from simulations import services

    return services.run_submit(scenario=world["x"]["scenario"], user=world["users"]["planner"], kind="predict",
                               force=True)


def test_claim_refuses_a_live_lease_and_takes_over_a_lapsed_one_once(world, fake_engine) -> None:
    from simulations import services
    from simulations.models import RunEvent, SimulationRun
    from simulations.services.execution import _finish
    from simulations.services.leases import renew_lease

    run = _run(world)
    t0 = timezone.now()
    first = services.run_claim(run_id=run.pk, now=t0, lease_s=30)
    assert first
    assert services.run_claim(run_id=run.pk, now=t0 + timedelta(seconds=29), lease_s=30) is None  # alive
    # 31 s without a heartbeat: the lease lapsed (its worker died); two deliveries race for it
    later = t0 + timedelta(seconds=31)
    second = services.run_claim(run_id=run.pk, now=later, lease_s=30)
    assert second and second != first
    assert services.run_claim(run_id=run.pk, now=later, lease_s=30) is None  # the other delivery finds it renewed
    row = SimulationRun.objects.get(pk=run.pk)
    assert row.attempts == 2 and row.claim_token == second and row.heartbeat_at == later
    events = list(RunEvent.objects.filter(run=run).values_list("kind", "attempt", "message"))
    assert events == [("claimed", 1, ""), ("claimed", 2, "the previous execution's lease lapsed")]
    # the first execution, if it still lives, renews nothing and cannot finish
    assert renew_lease(run.pk, first) is False and renew_lease(run.pk, second) is True
    assert _finish(run.pk, first, status="succeeded", result={"x": 1}) is False
    assert SimulationRun.objects.get(pk=run.pk).result is None


def test_claim_compares_the_token_it_read(world, fake_engine, monkeypatch) -> None:
    """A claim between this claimer's read and its write (another worker, or the reaper) wins; this one gets 0 rows."""
    from simulations import services
    from simulations.models import SimulationRun

    run = _run(world)
    t0 = timezone.now()
    assert services.run_claim(run_id=run.pk, now=t0, lease_s=30)
    real = SimulationRun.objects.filter

    class Racy:
        fired = False

    def filter_then_race(*args: Any, **kwargs: Any) -> Any:
        qs = real(*args, **kwargs)
        if "claim_token" in kwargs and not Racy.fired:  # the UPDATE's filter: another claim lands first
            Racy.fired = True
            real(pk=run.pk).update(claim_token="someone-else", attempts=2)
        return qs

    monkeypatch.setattr(SimulationRun.objects, "filter", filter_then_race)
    assert services.run_claim(run_id=run.pk, now=t0 + timedelta(seconds=60), lease_s=30) is None
    monkeypatch.undo()
    assert SimulationRun.objects.get(pk=run.pk).claim_token == "someone-else"


def test_an_execution_that_lost_its_claim_stops_at_its_next_checkpoint_without_writing(world, monkeypatch) -> None:
    from engine.budget import checkpoint
    from simulations import limits, services
    from simulations.models import RunEvent, SimulationRun
    from simulations.services import execution

    monkeypatch.setattr(limits, "HEARTBEAT_EVERY_S", 0.0)  # every checkpoint renews
    run = _run(world)
    seen: list[str] = []

    def taken_over_midway(*_: Any, **__: Any) -> dict[str, Any]:
        checkpoint()  # renews: still ours
        # the lease lapsed meanwhile (a long GC pause, a cut-off network) and another worker claimed the run
        SimulationRun.objects.filter(pk=run.pk).update(claim_token="the-new-owner", attempts=2)
        for _ in range(3):
            checkpoint()  # raises Cancelled on the first call
            seen.append("kept computing")
        return {"step_time_s": 1.0}

    monkeypatch.setattr(execution, "compute", taken_over_midway)
    services.run_execute(run_id=run.pk)
    row = SimulationRun.objects.get(pk=run.pk)
    assert seen == [] and row.status == "running" and row.result is None and row.claim_token == "the-new-owner"
    [lost] = RunEvent.objects.filter(run=run, kind="lost")
    assert lost.attempt == 1 and "claimed by another execution (attempt 2)" in lost.message
    assert not RunEvent.objects.filter(run=run, kind="finished").exists()


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_renews_the_lease_while_the_engine_never_checks_in(world, settings, monkeypatch) -> None:
    """Committed rows (transaction=True), as on a worker: the thread renews from its own connection."""
    from simulations import services
    from simulations.models import SimulationRun
    from simulations.services import execution

    settings.FP_RUN_LEASE_S = 3
    settings.FP_RUN_HEARTBEAT_S = 0.05
    run = _run(world)
    beats: set[Any] = set()

    def no_checkpoints(*_: Any, **__: Any) -> dict[str, Any]:
        import time

        for _ in range(2000):  # numpy deep in a solve: no checkpoint; only the thread can renew
            beats.add(SimulationRun.objects.values_list("heartbeat_at", flat=True).get(pk=run.pk))
            if len(beats) >= 4:
                break
            time.sleep(0.01)
        return {"step_time_s": 1.0}

    monkeypatch.setattr(execution, "compute", no_checkpoints)
    done = services.run_execute(run_id=run.pk)
    assert done is not None and done.status == "succeeded", done and done.error
    assert len(beats) >= 4, "the lease advanced while the engine worked without a checkpoint"
    alive = [t for t in threading.enumerate() if t.name.startswith(f"heartbeat run {run.pk}")]
    assert alive == [], "the heartbeat stops with the execution"


# --- the reaper ----------------------------------------------------------------------------------------------
@pytest.fixture
def sent(monkeypatch) -> list[int]:
    from simulations import tasks

    out: list[int] = []
    monkeypatch.setattr(tasks.execute_run, "apply_async", lambda args, **kw: out.append(args[0]))
    return out


def test_reaper_requeues_a_lapsed_lease_and_records_why(world, fake_engine, sent) -> None:
    from simulations import services
    from simulations.models import RunEvent, SimulationRun

    run = _run(world)
    t0 = timezone.now()
    assert services.run_claim(run_id=run.pk, now=t0, lease_s=30)
    assert services.run_reap(now=t0 + timedelta(seconds=29), lease_s=30, queue_depth=lambda: 0)["requeued"] == 0
    counts = services.run_reap(now=t0 + timedelta(seconds=45), lease_s=30, redispatch_after_s=45,
                               queue_depth=lambda: 0)
    assert counts == {"requeued": 1, "redispatched": 0, "failed": 0} and sent == [run.pk]
    row = SimulationRun.objects.get(pk=run.pk)
    assert row.status == "queued" and row.claim_token == ""
    event = RunEvent.objects.get(run=run, kind="lease-lapsed")
    assert event.worker == "reaper" and "no heartbeat for 45 s (lease 30 s)" in event.message
    # the redelivered message claims it (attempt 2) and it finishes once
    assert services.run_execute(run_id=run.pk).status == "succeeded"


def test_reaper_resends_queued_runs_only_when_the_broker_lost_messages(world, fake_engine, sent) -> None:
    from simulations import services
    from simulations.models import RunEvent, SimulationRun

    a = _run(world)
    b = services.run_submit(scenario=world["x"]["fleet_scenario"], user=world["users"]["planner"], kind="tco",
                            force=True)
    t0 = timezone.now()
    SimulationRun.objects.filter(pk__in=[a.pk, b.pk]).update(heartbeat_at=t0)
    later = t0 + timedelta(seconds=60)
    kw: dict[str, Any] = {"now": later, "lease_s": 30, "redispatch_after_s": 45}
    # a backlog: both messages wait in the queue behind others -> nothing re-sent
    assert services.run_reap(**kw, queue_depth=lambda: 7)["redispatched"] == 0 and sent == []
    # the broker was flushed: 0 messages for 2 queued runs -> both re-sent, once per pass
    assert services.run_reap(**kw, queue_depth=lambda: 0)["redispatched"] == 2
    assert sorted(sent) == sorted([a.pk, b.pk])
    assert services.run_reap(**kw, queue_depth=lambda: 0)["redispatched"] == 0  # just re-sent: not again yet
    message = RunEvent.objects.filter(run=a, kind="redispatched").get().message
    assert "fewer messages than there are queued runs" in message
    assert not any(ch.isdigit() for ch in message)  # shown to the team: no counts of other teams' runs
    # a broker that cannot say counts as short; a run queued past FP_RUN_STUCK_AFTER_S is re-sent whatever it says
    sent.clear()
    assert services.run_reap(now=later + timedelta(seconds=46), lease_s=30, redispatch_after_s=45,
                             queue_depth=lambda: None)["redispatched"] == 2
    sent.clear()
    with_backlog = services.run_reap(now=later + timedelta(seconds=2000), lease_s=30, redispatch_after_s=45,
                                     queue_depth=lambda: 99)
    assert with_backlog["redispatched"] == 2 and len(sent) == 2
