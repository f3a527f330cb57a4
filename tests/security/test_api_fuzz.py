"""Schemathesis against the project's own OpenAPI schema (/api/schema/), every operation.

The WSGI app (planner.wsgi) is called in-process with pytest-django's test database; requests carry the
API token of a home-team admin over a seeded world (tests/security/seed.py), and path ids are drawn
from the seeded objects half of the time so the fuzzer reaches real rows, not only 404s. Data are
generated from the schema (positive) and against it (negative). Checks: no 5xx, responses match the
documented schema, content types match.

Budget: ``FP_FUZZ_EXAMPLES`` examples per operation (default 30 → about 2,000 requests over the ~74
operations, measured 35–70 s on PostgreSQL / 2 cores; part of ``make test``). ``make fuzz``
(scripts/fuzz.sh) runs 200 per operation with a fresh random seed. ``FP_FUZZ_SEED=<int>`` replays a
seed; without it the run is derandomized, so CI is reproducible.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from tests.security.seed import World, seed_world

EXAMPLES = int(os.environ.get("FP_FUZZ_EXAMPLES", "30"))
SEED = os.environ.get("FP_FUZZ_SEED")
STATS: Counter[str] = Counter()
SEEDED_IDS: dict[str, list[int]] = {}  # path prefix ("/api/v1/scenarios/") -> seeded home-team ids
TOKEN: dict[str, str] = {}

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(1800)]


@pytest.fixture
def fuzz_world(db: Any, monkeypatch: pytest.MonkeyPatch) -> World:
    """Seed, issue the fuzzing token, and keep Celery out of it (the API is under test, not the worker)."""
    from accounts.models import ApiToken
    from simulations import services

    monkeypatch.setattr(services.dispatch, "enqueue_runs", lambda run_ids, sweep_id=None: None)
    world = seed_world()
    h = world.home
    _, raw = ApiToken.issue(user=h.users["admin"], team=h.team, name="fuzz")
    sacrificial, _ = ApiToken.issue(user=h.users["admin"], team=h.team, name="fuzz-revocable")
    TOKEN["raw"] = raw
    version = h.catalog.latest_version()
    SEEDED_IDS.clear()
    SEEDED_IDS.update({
        "/api/v1/catalogs/": [h.catalog.pk, world.global_catalog.pk],
        "/api/v1/catalog-versions/": [version.pk],
        "/api/v1/catalog-items/": list(version.items.values_list("pk", flat=True)[:3]),
        "/api/v1/fleets/": [h.fleet.pk],
        "/api/v1/workloads/": [h.workload.pk],
        "/api/v1/scenarios/": [h.scenario.pk],
        "/api/v1/runs/": [h.run.pk],
        "/api/v1/sweeps/": [h.sweep.pk],
        "/api/v1/reports/": [h.report.pk],
        "/api/v1/reevaluations/": [h.reevaluation.pk],
        "/api/v1/teams/": [h.team.pk],
        "/api/v1/tokens/": [sacrificial.pk],
        "/api/v1/calibration-files/": [h.calibration_file.pk],
        "/api/v1/calibration-profiles/": [h.calibration_profile.pk],
        "/api/v1/capacity-plans/": [h.capacity_plan.pk],
        # other team's ids too: the answer must be a clean 404, never a 5xx or a leak
        "other": [world.other.scenario.pk, world.other.run.pk, world.other.fleet.pk],
    })
    return world


@pytest.fixture
def _keep_test_connection() -> Any:
    """As Django's test client does: a WSGI request must not close the test transaction's connection."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(fuzz_world: World, _keep_test_connection: None) -> Any:
    from planner.wsgi import application

    schema = schemathesis.from_wsgi(
        "/api/schema/?format=json",
        application,
        data_generation_methods=[schemathesis.DataGenerationMethod.positive,
                                 schemathesis.DataGenerationMethod.negative],
        # PostgreSQL cannot store NUL in text; DRF refuses it in CharFields, the fuzzer checks the rest.
        generation_config=schemathesis.GenerationConfig(allow_x00=True),
    )

    @schema.hook("before_generate_path_parameters")
    def _seeded_ids(context: Any, strategy: Any) -> Any:
        path = context.operation.path
        prefix = next((p for p in SEEDED_IDS if p != "other" and path.startswith(p)), None)
        if prefix is None or "{id}" not in path:
            return strategy
        real = st.sampled_from(SEEDED_IDS[prefix] + SEEDED_IDS["other"]).map(str)
        return st.one_of(strategy, strategy.flatmap(lambda params: real.map(lambda v: {**params, "id": v})))

    return schema


schema = schemathesis.from_pytest_fixture("api_schema")


def _maybe_seed(test: Any) -> Any:
    return hypothesis_seed(int(SEED))(test) if SEED else test


@schema.parametrize()
@_maybe_seed
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=SEED is None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
    print_blob=True,
)
def test_api_fuzz(case: Any) -> None:
    if case.media_type and "json" not in case.media_type and case.body is not None and not isinstance(case.body, dict):
        return  # the WSGI client can only encode form bodies from a mapping (JSON bodies are fuzzed fully)
    headers = {"Authorization": f"Token {TOKEN['raw']}"}
    response = case.call_wsgi(headers=headers)
    STATS[f"{case.method} {case.path}"] += 1
    STATS[f"status:{response.status_code}"] += 1
    case.validate_response(
        response,
        checks=(not_a_server_error, response_schema_conformance, content_type_conformance),
        headers=headers,
    )


def test_fuzz_covered_every_operation() -> None:
    """Runs after test_api_fuzz (file order): every API operation in the schema was exercised."""
    if not STATS:
        pytest.skip("test_api_fuzz did not run (deselected)")
    ops = {k for k in STATS if not k.startswith("status:")}
    total = sum(v for k, v in STATS.items() if not k.startswith("status:"))
    print(f"\nfuzz: {total} requests over {len(ops)} operations; statuses "
          f"{sorted((k[7:], v) for k, v in STATS.items() if k.startswith('status:'))}")
    from tests.security.endpoints import api_endpoints

    routes = {(e.method, "/" + e.route.replace("{pk}", "{id}")) for e in api_endpoints()}
    seen = {tuple(k.split(" ", 1)) for k in ops}
    missing = sorted(r for r in routes if r not in seen and r[1] not in ("/api/v1/", "/api/v1/reports/compare"))
    assert not missing, f"operations never fuzzed: {missing}"
    assert total >= EXAMPLES * len(ops) // 2
