"""Scheduled re-evaluation: what triggers it, once per change, the diff text, signed webhook delivery."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def watched(world, finished_run) -> Any:
    from planning import services as planning

    x = world["x"]
    admin = world["users"]["admin"]
    scenario = planning.scenario_update(scenario=x["fleet_scenario"], user=admin, catalog=x["catalog"], watched=True)
    run = finished_run(scenario, admin, kind="tco", force=True)
    assert run.status == "succeeded"
    return scenario


@pytest.fixture
def receiver() -> Iterator[dict[str, Any]]:
    got: dict[str, Any] = {"requests": [], "status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got["requests"].append((dict(self.headers), body))
            self.send_response(got["status"])
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    got["url"] = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield got
    server.shutdown()


def test_nothing_changed_means_no_reevaluation(watched) -> None:
    from simulations import services

    assert services.scenario_needs_reevaluation(scenario=watched)[0] is False
    assert services.reevaluate_watched() == []


def test_catalog_price_change_reevaluates_once_with_diff(world, watched, fake_engine, django_capture_on_commit_callbacks,
                                                         monkeypatch) -> None:
    from planning import services as planning
    from simulations import services, tasks
    from simulations.models import ReEvaluation

    sent: list[int] = []
    monkeypatch.setattr(tasks.execute_run, "apply_async", lambda args, **kw: sent.append(args[0]))
    item = world["x"]["catalog"].latest_version().items.get(key="A100-80GB")
    planning.catalog_item_update(item=item, user=world["users"]["admin"],
                                 data={"unit_price_usd": item.unit_price_usd * 1.3})
    needed, reasons, last = services.scenario_needs_reevaluation(scenario=watched)
    assert needed and any("catalog version v1 → v2" in r for r in reasons)
    with django_capture_on_commit_callbacks(execute=True):
        created = services.reevaluate_watched()
    assert len(created) == 1 and len(sent) == 1
    # A second beat (or the same tick delivered twice) finds the same change: no second re-evaluation.
    with django_capture_on_commit_callbacks(execute=True):
        assert services.reevaluate_watched() == []
    assert ReEvaluation.objects.count() == 1 and len(sent) == 1
    services.run_execute(run_id=sent[0])
    reeval = ReEvaluation.objects.get()
    assert reeval.previous_run == last and reeval.new_run_id == sent[0] and reeval.completed_at
    assert reeval.summary.startswith("TCO +"), reeval.summary
    assert "price +30%" in reeval.summary
    assert reeval.changes["tco.capex_usd"]["delta_pct"] == pytest.approx(30.0, rel=1e-6)
    assert reeval.delivery_status == "none"  # no webhook configured
    assert services.reevaluate_watched() == []  # evaluated: nothing left to do
    watched.refresh_from_db()
    assert watched.last_evaluated_at is not None


def test_fleet_and_engine_changes_trigger(world, watched, monkeypatch) -> None:
    from planning import services as planning
    from simulations import services

    planning.fleet_update(fleet=world["x"]["fleet"], user=world["users"]["admin"], nic_gbps=400)
    needed, reasons, _ = services.scenario_needs_reevaluation(scenario=watched)
    assert needed and any("fleet" in r for r in reasons)
    monkeypatch.setattr(services.reevaluation, "engine_version", lambda: "99.0.0")
    needed, reasons, _ = services.scenario_needs_reevaluation(scenario=watched)
    assert any("engine" in r for r in reasons)


def test_webhook_is_signed_and_retried(world, watched, fake_engine, receiver, monkeypatch) -> None:
    from planning import services as planning
    from simulations import services, tasks

    team = world["team"]
    team.webhook_url = receiver["url"]
    team.webhook_secret = "s3cret"
    team.save()
    deliveries: list[int] = []
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda args, **kw: deliveries.append(args[0]))
    monkeypatch.setattr(tasks.execute_run, "apply_async", lambda args, **kw: None)
    planning.fleet_update(fleet=world["x"]["fleet"], user=world["users"]["admin"], nic_gbps=800)
    [reeval] = services.reevaluate_watched()
    services.run_execute(run_id=reeval.new_run_id)
    reeval.refresh_from_db()
    assert reeval.delivery_status == "pending"

    receiver["status"] = 503
    with pytest.raises(services.WebhookError):
        services.webhook_deliver(reevaluation_id=reeval.pk)
    receiver["status"] = 200
    assert services.webhook_deliver(reevaluation_id=reeval.pk) is True
    assert services.webhook_deliver(reevaluation_id=reeval.pk) is True  # already delivered: not re-sent
    assert len(receiver["requests"]) == 2
    headers, body = receiver["requests"][-1]
    ts = headers["X-Fabric-Planner-Timestamp"]
    expected = "sha256=" + hmac.new(b"s3cret", ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert headers["X-Fabric-Planner-Signature"] == expected
    payload = json.loads(body)
    assert payload["event"] == "scenario.reevaluated" and payload["scenario"]["id"] == watched.pk
    assert "fleet" in " ".join(payload["reasons"])
    reeval.refresh_from_db()
    assert reeval.delivery_status == "delivered" and reeval.delivery_attempts == 2


def test_reevaluations_api(world, watched, fake_engine, api_client_for, monkeypatch) -> None:
    from planning import services as planning
    from simulations import services, tasks

    monkeypatch.setattr(tasks.execute_run, "apply_async", lambda args, **kw: None)
    planning.fleet_update(fleet=world["x"]["fleet"], user=world["users"]["admin"], nic_gbps=400)
    [reeval] = services.reevaluate_watched()
    services.run_execute(run_id=reeval.new_run_id)
    client = api_client_for(world["users"]["viewer"])
    body = client.get(f"/api/v1/reevaluations/?scenario={watched.pk}").json()
    assert body["count"] == 1 and body["results"][0]["summary"]


def test_beat_task_lock(world, watched) -> None:
    from django.core.cache import cache

    from simulations import tasks

    cache.add(tasks.REEVALUATION_LOCK, "1", timeout=60)
    try:
        assert "skipped" in tasks.reevaluate_watched.run()
    finally:
        cache.delete(tasks.REEVALUATION_LOCK)
    assert tasks.reevaluate_watched.run() == {"reevaluations": []}


@pytest.mark.django_db(transaction=True)
def test_reevaluate_command_queues_changed_scenarios_and_waits(world, watched, fake_engine, monkeypatch) -> None:
    """``manage.py reevaluate --wait``: the beat's service, run now, followed to completion (autocommit, as
    from a shell, so runs are enqueued as soon as their rows commit)."""
    from io import StringIO

    from django.core.management import call_command

    from planning import services as planning
    from simulations import services, tasks

    # Stand in for the worker: execute the run as soon as it is enqueued.
    monkeypatch.setattr(tasks.execute_run, "apply_async", lambda args, **kw: services.run_execute(run_id=args[0]))
    out = StringIO()
    call_command("reevaluate", stdout=out)
    assert out.getvalue().startswith("0 re-evaluation(s) queued")

    item = world["x"]["catalog"].latest_version().items.get(key="A100-80GB")
    planning.catalog_item_update(item=item, user=world["users"]["admin"],
                                 data={"unit_price_usd": item.unit_price_usd * 1.3})
    out = StringIO()
    call_command("reevaluate", "--wait", "--timeout", "30", stdout=out, stderr=StringIO())
    text = out.getvalue()
    assert text.startswith("1 re-evaluation(s) queued")
    assert f"scenario {watched.pk}: catalog version v1 → v2" in text
    assert "price +30%" in text


def test_webhook_task_retries_with_backoff_then_records_the_failure(
    world, watched, fake_engine, receiver, monkeypatch
) -> None:
    """The delivery task retries a 5xx through Celery's autoretry (max_retries + 1 attempts), then gives up
    and records the failure on the re-evaluation instead of raising."""
    from planning import services as planning
    from simulations import services, tasks

    team = world["team"]
    team.webhook_url = receiver["url"]
    team.webhook_secret = "s3cret"
    team.save()
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda args, **kw: None)
    monkeypatch.setattr(tasks.execute_run, "apply_async", lambda args, **kw: None)
    planning.fleet_update(fleet=world["x"]["fleet"], user=world["users"]["admin"], nic_gbps=800)
    [reeval] = services.reevaluate_watched()
    services.run_execute(run_id=reeval.new_run_id)
    receiver["status"] = 503
    assert tasks.deliver_webhook.autoretry_for == (services.WebhookError,) and tasks.deliver_webhook.retry_backoff
    result = tasks.deliver_webhook.apply(args=[reeval.pk])  # eager: Celery runs the retries at once
    assert result.get() is False
    reeval.refresh_from_db()
    attempts = tasks.deliver_webhook.max_retries + 1
    assert len(receiver["requests"]) == attempts and reeval.delivery_attempts == attempts
    assert reeval.delivery_status == "failed" and "503" in reeval.delivery_error
