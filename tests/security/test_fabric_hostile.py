"""Hostile fabric-study options (issue #13): every option of the ``fabric`` run kind refuses huge, non-integral,
mistyped and out-of-range values with a fast 400 naming ``params.<option>``, over the API and in sweep axes;
nothing is stored and nothing reaches a worker."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.security.seed import World, seed_world

pytestmark = pytest.mark.django_db

HUGE = ["1e308", "-1e308", "1e400", "1" + "0" * 400]
NON_INTEGRAL = ["2.5", "-0.5"]
WRONG_TYPE = ["true", '"1024"', "[]", "{}", "null"]
INT_PARAMS = {"seeds": {}, "ranks": {}, "channels": {}, "seed": {}, "qps": {"routing": "ecmp"}}
FRACTION_PARAMS = ("fragmentation", "background")
CHOICE_PARAMS = ("traffic", "routing", "placement")


@pytest.fixture
def world() -> World:
    return seed_world(execute=False)


@pytest.fixture
def admin(world: World) -> APIClient:
    c = APIClient()
    c.force_login(world.home.users["admin"])
    c.raise_request_exception = False
    return c


def _errors(resp: Any) -> dict[str, Any]:
    try:
        return dict(resp.json().get("errors") or {})
    except ValueError:
        return {}


def _post(admin: APIClient, url: str, params_json: str) -> Any:
    return admin.post(url, f'{{"kind": "fabric", "params": {params_json}}}', content_type="application/json")


def _count_engine_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every run execution (the engine) and every enqueue: a refused request must reach neither."""
    from simulations.services import dispatch, execution

    work: list[str] = []
    monkeypatch.setattr(execution, "compute", lambda kind, *a, **k: work.append(f"compute {kind}"))
    monkeypatch.setattr(dispatch, "enqueue_runs", lambda ids, **k: work.append(f"enqueue {ids}"))
    return work


def test_numeric_options_refuse_hostile_values(world: World, admin: APIClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from simulations.models import SimulationRun

    url = f"/api/v1/scenarios/{world.home.scenario.pk}/run/"
    before = SimulationRun.objects.count()
    work = _count_engine_work(monkeypatch)
    failures = []
    cases = [(p, raw, extra) for p, extra in INT_PARAMS.items() for raw in [*HUGE, *NON_INTEGRAL, *WRONG_TYPE, "-1", "0"]]
    cases += [(p, raw, {}) for p in FRACTION_PARAMS for raw in [*HUGE, *WRONG_TYPE, "-0.1", "1.5"]]
    for param, raw, extra in cases:
        if param in ("seed",) and raw == "0":
            continue  # seed 0 is valid
        if param == "ranks" and raw == "null":
            continue  # null = all GPUs
        prefix = "".join(f'"{k}": "{v}", ' for k, v in extra.items())
        resp = _post(admin, url, f'{{{prefix}"{param}": {raw}}}')
        if resp.status_code != 400:
            failures.append(f"{param}={raw[:12]}: {resp.status_code} {resp.content[:120]!r}")
        elif f"params.{param}" not in _errors(resp):
            failures.append(f"{param}={raw[:12]}: error does not name params.{param}: {_errors(resp)}")
    for raw in ("NaN", "Infinity"):  # not JSON: the parser refuses the body before any field is read
        assert _post(admin, url, f'{{"fragmentation": {raw}}}').status_code == 400
    assert not failures, "\n".join(failures)
    assert SimulationRun.objects.count() == before
    assert work == [], "refused before any engine work or queueing (the time a refusal takes: make bench)"
    assert _post(admin, url, '{"seeds": 2}').status_code == 202 and work, "the counter sees an accepted study"


@pytest.mark.parametrize("param", CHOICE_PARAMS)
def test_choice_options_refuse_unknown_and_mistyped_values(world: World, admin: APIClient, param: str) -> None:
    from simulations.models import SimulationRun

    url = f"/api/v1/scenarios/{world.home.scenario.pk}/run/"
    before = SimulationRun.objects.count()
    for raw in ['"warp"', '"x\\u0000y"', '"' + "a" * 5000 + '"', "1", "true", "{}", "null", '["ring-allreduce:' + "z" * 50 + '"]']:
        resp = _post(admin, url, f'{{"{param}": {raw}}}')
        assert resp.status_code == 400, (param, raw[:20], resp.status_code, resp.content[:200])
    assert SimulationRun.objects.count() == before


def test_sweep_param_axes_are_checked_before_anything_is_created(world: World, admin: APIClient) -> None:
    from simulations.models import SimulationRun, Sweep

    url = f"/api/v1/scenarios/{world.home.scenario.pk}/sweep/"
    runs, sweeps = SimulationRun.objects.count(), Sweep.objects.count()
    for axes in ({"params.seeds": [1, 1e308]}, {"params.routing": ["ecmp", "warp"]}, {"params.qps": [2]},
                 {"params.placement": ["packed", None]}, {"params.colour": ["red"]}):
        resp = admin.post(url, {"kind": "fabric", "axes": axes}, format="json")
        assert resp.status_code == 400, (axes, resp.status_code, resp.content[:200])
        assert any(k.startswith("params.") or k.startswith("axes.") for k in _errors(resp)), _errors(resp)
    assert SimulationRun.objects.count() == runs and Sweep.objects.count() == sweeps
