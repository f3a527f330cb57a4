"""Portal forms refuse hostile input exactly as the API does (issue #23): JSON nested 100,000 deep, NUL bytes, too
many items — one reader, core.text.loads_json — and oversized lists (999 run ids, 1,000,000 job rows) before any
work, each a 400 page with a clear message, never a 500."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.portal.test_capacity_builder_pages import _post

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000
HOSTILE = {
    "deep": (DEEP, "levels deep, more than the limit of 64"),
    "deep-object": (DEEP_OBJECT, "levels deep, more than the limit of 64"),
    "nul": (json.dumps([{"name": "x\u0000"}]), "NUL character"),
    "many": ("[" + ",".join(["0"] * 250_000) + "]", "more than 200,000 keys and values"),
    "nan": ('[{"rate_per_day": NaN}]', "NaN is not a JSON number"),
}


@pytest.fixture
def planner(world: dict[str, Any], client: Any) -> Any:
    client.force_login(world["users"]["planner"])
    client.raise_request_exception = False
    return client


@pytest.mark.parametrize("field", ["arrivals", "candidates", "extra_clusters"])
@pytest.mark.parametrize("case", list(HOSTILE))
def test_builder_json_fields_refuse_hostile_json(world: dict[str, Any], planner: Any, field: str, case: str) -> None:
    from planning.models import CapacityPlan

    text, words = HOSTILE[case]
    r = planner.post("/capacity/new/", _post(world, **{field: text}))
    assert r.status_code == 400, (field, case, r.status_code)
    assert words in r.content.decode()
    assert not CapacityPlan.objects.exists()


def test_builder_hidden_workload_refuses_hostile_json(world: dict[str, Any], planner: Any) -> None:
    r = planner.post("/capacity/new/", _post(world, **{"jobs-1-kept": DEEP, "jobs-1-duration_days": ""}))
    assert r.status_code == 400 and "nested 100,000 levels deep" in r.content.decode()


def test_the_api_and_the_portal_refuse_the_same_text(world: dict[str, Any], planner: Any, api_client_for: Any) -> None:
    api = api_client_for(world["users"]["planner"])
    for text, words in HOSTILE.values():
        body = f'{{"name": "x", "document": {{"horizon_days": 30, "clusters": [], "arrivals": {text}}}}}'
        r = api.generic("POST", "/api/v1/capacity-plans/", body, content_type="application/json")
        assert r.status_code == 400 and words in r.json()["errors"]["detail"][0], (words, r.content[:200])


def test_builder_refuses_a_million_job_rows_before_building_a_form(world: dict[str, Any], planner: Any) -> None:
    from portal.forms.capacity import PlanJobForm

    with mock.patch.object(PlanJobForm, "__init__", side_effect=AssertionError("a job form was built")):
        for total in ("1000000", "201", "-1", "9" * 40):
            r = planner.post("/capacity/new/", _post(world, **{"jobs-TOTAL_FORMS": total}))
            assert r.status_code == 400, (total, r.status_code)
            assert "at most 200 job rows" in r.content.decode()


def test_calibration_scenario_refuses_hostile_json(world: dict[str, Any], planner: Any) -> None:
    fleet = world["x"]["fleet"]
    upload = SimpleUploadedFile("allreduce.txt", b"# nccl-tests\n", content_type="text/plain")
    with mock.patch("planning.services.calibration.read_upload", side_effect=AssertionError("file read")):
        r = planner.post(f"/fleets/{fleet.pk}/calibration/", {"kind": "nccl", "file": upload, "scenario": DEEP})
    assert r.status_code == 400 and "nested 100,000 levels deep" in r.content.decode()


@pytest.mark.parametrize("url", ["/compare/?runs={ids}", "/compare/?pick={first}&runs={ids}",
                                 "/compare/export/?runs={ids}&format=csv", "/capacity/compare/?runs={ids}",
                                 "/capacity/compare/?plans={ids}"])
def test_compare_pages_refuse_999_ids_before_any_query(world: dict[str, Any], planner: Any, url: str) -> None:
    ids = ",".join(str(i) for i in range(1, 1000))
    with mock.patch("portal.views.reports._runs_for", side_effect=AssertionError("queried runs")), \
         mock.patch("portal.views.capacity_builder._runs_for", side_effect=AssertionError("queried runs")):
        r = planner.get(url.format(ids=ids, first=1))
    assert r.status_code == 400, (url, r.status_code)
    assert "at most" in r.content.decode()


def test_api_compare_refuses_999_ids_before_any_query(world: dict[str, Any], api_client_for: Any) -> None:
    api = api_client_for(world["users"]["planner"])
    ids = ",".join(str(i) for i in range(1, 1000))
    with mock.patch("simulations.selectors.run_list", side_effect=AssertionError("queried runs")):
        r = api.get(f"/api/v1/reports/compare/?runs={ids}")
    assert r.status_code == 400 and "at most 50 run ids" in r.json()["errors"]["runs"][0]

