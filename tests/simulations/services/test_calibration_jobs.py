"""Calibration uploads and fits as jobs (issue #23).

* an upload answers 202 with its job; the job (run in-process here, as a worker would) stores the importer's
  compact reading and a summary beside the file; a step log's per-step rows are not stored;
* list endpoints and the calibration page never select a file's text or parsed rows, nor a profile's curves;
* a fit is one transaction: a failure at any point leaves no profile version and no change-log row;
* a fit or an upload repeated with the same Idempotency-Key answers the first job (the same version, the same
  file), never a second; the key with another request is a 409;
* a cancelled import leaves the file refused with why; a calibration job's run page renders.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.paths import ROOT

pytestmark = pytest.mark.django_db

EXAMPLES = ROOT / "examples" / "calibration"
MANIFEST = json.loads((EXAMPLES / "manifest.json").read_text(encoding="utf-8"))
UPLOAD_HEAVY = ('"planning_calibrationupload"."content"', '"planning_calibrationupload"."parsed"')
PROFILE_HEAVY = '"planning_calibrationprofile"."profile"'


def _nccl() -> str:
    entry = next(e for e in MANIFEST["nccl"] if e["ranks"] == 32 and e["collective"] == "all_reduce")
    return (EXAMPLES / entry["file"]).read_text(encoding="utf-8")


def _run_scenario() -> tuple[dict[str, Any], str]:
    run = next(r for r in MANIFEST["runs"] if r["id"] == "llama7b-32gpu-bf16")
    scenario = {k: copy.deepcopy(run["scenario"][k]) for k in ("model", "training", "parallelism")}
    scenario["cluster"] = {"gpus": run["scenario"]["cluster"]["gpus"]}
    return scenario, (EXAMPLES / run["file"]).read_text(encoding="utf-8")


def _jobs() -> list[Any]:
    from simulations import services
    from simulations.models import JobKind, SimulationRun

    ids = SimulationRun.objects.filter(kind__in=JobKind.values, status="queued").order_by("pk").values_list("pk", flat=True)
    return [services.run_execute(run_id=i) for i in list(ids)]


@pytest.fixture
def planner(world) -> APIClient:
    c = APIClient()
    c.force_authenticate(world["users"]["planner"])
    return c


def _upload(client: APIClient, fleet: Any, **body: Any) -> Any:
    return client.post("/api/v1/calibration-files/", {"fleet": fleet.pk, "kind": "nccl-tests", **body}, format="json")


def test_upload_is_stored_at_once_and_read_by_its_job(world, planner) -> None:
    from planning.models import CalibrationUpload
    from simulations.models import SimulationRun

    fleet = world["x"]["fleet"]
    scenario, text = _run_scenario()
    # a long step log in the CSV form: ~20,000 steps, within the size limit
    steps = "\n".join(f"{i},{8.1 + (i % 7) * 0.01:.3f}" for i in range(1, 20_001))
    r = _upload(planner, fleet, kind="step-log", content="step,step_time_s\n" + steps + "\n", scenario=scenario,
                label="long run")
    assert r.status_code == 202, r.content
    body = r.json()
    assert body["status"] == "pending" and body["summary"] == {} and body["job"]["status"] == "queued"
    job = SimulationRun.objects.get(pk=body["job"]["id"])
    assert job.kind == "cal-import" and job.params == {"upload": body["id"], "fleet": fleet.pk}
    [done] = _jobs()
    assert done.status == "succeeded" and done.progress == 100, done.error
    upload = CalibrationUpload.objects.get(pk=body["id"])
    assert upload.status == "ready" and upload.job_id == job.pk and upload.error == ""
    assert "steps" not in upload.parsed and upload.parsed["steps_logged"] == 20_000
    assert upload.summary["steps_used"] > 19_000 and upload.summary["format"] == "csv"
    assert len(json.dumps(upload.parsed)) < 5_000, "a step log's parsed rows stay out of the database"
    assert done.result["summary"] == upload.summary
    # the example log through the same path
    r = _upload(planner, fleet, kind="step-log", content=text, scenario=scenario, label="example")
    _jobs()
    assert planner.get(f"/api/v1/calibration-files/{r.json()['id']}/").json()["summary"]["step_time_s"] > 0


def test_list_queries_never_select_file_contents_or_profile_curves(world, planner, client) -> None:
    from planning.services import calibration

    fleet = world["x"]["fleet"]
    for _ in range(3):
        assert _upload(planner, fleet, content=_nccl()).status_code == 202
    _jobs()
    admin = world["users"]["admin"]
    calibration.calibration_fit(fleet=fleet, user=admin)
    calibration.calibration_fit(fleet=fleet, user=admin)
    with CaptureQueriesContext(connection) as files:
        r = planner.get(f"/api/v1/calibration-files/?fleet={fleet.pk}")
    assert r.status_code == 200 and r.json()["count"] == 3
    assert all(f["status"] == "ready" and f["summary"]["ranks"] == 32 and f["job"]["status"] == "succeeded"
               for f in r.json()["results"])
    sql = [q["sql"] for q in files.captured_queries]
    assert not [s for s in sql if any(h in s for h in UPLOAD_HEAVY)], sql
    assert len(sql) < 12, "one query for the files, one for their jobs (no query per row)"
    with CaptureQueriesContext(connection) as profiles:
        r = planner.get(f"/api/v1/calibration-profiles/?fleet={fleet.pk}")
    assert r.status_code == 200 and [p["version"] for p in r.json()["results"]] == [2, 1]
    assert r.json()["results"][0]["summary"]["collectives"] and len(r.json()["results"][0]["uploads"]) == 3
    sql = [q["sql"] for q in profiles.captured_queries]
    assert not [s for s in sql if PROFILE_HEAVY in s or any(h in s for h in UPLOAD_HEAVY)], sql
    # the detail still has the whole fit
    pk = r.json()["results"][0]["id"]
    assert planner.get(f"/api/v1/calibration-profiles/{pk}/").json()["profile"]["collectives"]
    # the portal page: the current profile's curves (one row), never a file's text or parsed rows
    client.force_login(world["users"]["viewer"])
    with CaptureQueriesContext(connection) as page:
        html = client.get(f"/fleets/{fleet.pk}/calibration/").content.decode()
    assert "Profile v2" in html and "32 ranks" in html
    sql = [q["sql"] for q in page.captured_queries]
    assert not [s for s in sql if any(h in s for h in UPLOAD_HEAVY)], sql
    assert sum(PROFILE_HEAVY in s for s in sql) == 1, "the shown profile only"


def _fit_request(client: APIClient, fleet: Any, key: str | None = None, **body: Any) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post("/api/v1/calibration-profiles/", {"fleet": fleet.pk, **body}, format="json", **headers)


def test_a_fit_retried_with_its_idempotency_key_answers_the_same_version(world, planner) -> None:
    from planning.models import CalibrationProfile, ObjectChange
    from simulations.models import SimulationRun

    fleet = world["x"]["fleet"]
    _upload(planner, fleet, content=_nccl())
    _jobs()
    first = _fit_request(planner, fleet, key="fit-2026-q3", name="acceptance")
    assert first.status_code == 202, first.content
    assert first.json()["status"] == "queued" and first.json()["kind"] == "cal-fit"
    assert first["Location"] == first.json()["url"]
    again = _fit_request(planner, fleet, key="fit-2026-q3", name="acceptance")  # the client timed out; retries
    assert again.status_code == 202 and again.json()["id"] == first.json()["id"]
    _jobs()
    done = _fit_request(planner, fleet, key="fit-2026-q3", name="acceptance")
    assert done.status_code == 200 and done.json()["id"] == first.json()["id"]
    assert done.json()["status"] == "succeeded" and done.json()["version"] == 1
    profile = CalibrationProfile.objects.get(fleet=fleet)
    assert done.json()["profile"] == profile.pk and profile.name == "acceptance"
    assert SimulationRun.objects.filter(kind="cal-fit").count() == 1
    assert ObjectChange.objects.filter(object_type="calibration-profile").count() == 1
    # the same key for another request is refused; a new key is a new fit
    other = _fit_request(planner, fleet, key="fit-2026-q3", name="something else")
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["errors"]
    assert _fit_request(planner, fleet, key="fit-2026-q4").status_code == 202
    _jobs()
    assert sorted(CalibrationProfile.objects.filter(fleet=fleet).values_list("version", flat=True)) == [1, 2]
    assert _fit_request(planner, fleet, key="x" * 201).status_code == 400


def test_an_upload_retried_with_its_idempotency_key_is_stored_once(world, planner) -> None:
    from planning.models import CalibrationUpload

    fleet = world["x"]["fleet"]
    headers = {"HTTP_IDEMPOTENCY_KEY": "upload-1"}
    body = {"fleet": fleet.pk, "kind": "nccl-tests", "content": _nccl()}
    first = planner.post("/api/v1/calibration-files/", body, format="json", **headers)
    second = planner.post("/api/v1/calibration-files/", body, format="json", **headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"] and first.json()["job"]["id"] == second.json()["job"]["id"]
    assert CalibrationUpload.objects.filter(fleet=fleet).count() == 1
    other = planner.post("/api/v1/calibration-files/", {**body, "content": _nccl() + "\n# another file\n"},
                         format="json", **headers)
    assert other.status_code == 409


@pytest.mark.parametrize("breaks", ["engine", "change-log"])
def test_a_failing_fit_leaves_no_profile_version(world, planner, monkeypatch, breaks: str) -> None:
    from planning import changelog
    from planning.models import CalibrationProfile, ObjectChange
    from planning.services import calibration

    fleet = world["x"]["fleet"]
    _upload(planner, fleet, content=_nccl())
    _jobs()
    if breaks == "engine":
        def no_fit(*_: Any, **__: Any) -> Any:
            raise ValueError("nccl[0]: the curve has no points in the bandwidth regime")

        monkeypatch.setattr(calibration, "fit_profile", no_fit)
    else:  # the profile row is written, then the change log fails: the profile must not survive
        real = changelog.record

        def broken(**kw: Any) -> Any:
            if kw.get("object_type") == "calibration-profile":
                raise RuntimeError("change log unavailable")
            return real(**kw)

        monkeypatch.setattr(changelog, "record", broken)
    r = _fit_request(planner, fleet, key=f"fit-{breaks}")
    assert r.status_code == 202
    [job] = _jobs()
    assert job.status == "failed" and job.result is None
    if breaks == "engine":
        assert job.error_field == "uploads" and "bandwidth regime" in job.error
    else:
        assert "change log unavailable" in job.error
    assert not CalibrationProfile.objects.filter(fleet=fleet).exists()
    assert not ObjectChange.objects.filter(object_type="calibration-profile").exists()
    # the retry with the same key answers the failed job: nothing half-written to fix, nothing duplicated
    again = _fit_request(planner, fleet, key=f"fit-{breaks}")
    assert again.status_code == 200 and again.json()["id"] == job.pk and again.json()["status"] == "failed"


def test_a_fit_of_files_still_importing_is_refused_at_once(world, planner) -> None:
    fleet = world["x"]["fleet"]
    pending = _upload(planner, fleet, content=_nccl()).json()["id"]
    r = _fit_request(planner, fleet, uploads=[pending])
    assert r.status_code == 400 and "still being imported" in json.dumps(r.json())
    r = _fit_request(planner, fleet)  # default: the imported files, and there are none yet
    assert r.status_code == 400 and "no imported calibration files" in json.dumps(r.json())


def test_a_cancelled_import_leaves_the_file_refused(world, planner) -> None:
    from planning.models import CalibrationUpload
    from simulations import services
    from simulations.models import SimulationRun

    r = _upload(planner, world["x"]["fleet"], content=_nccl())
    job = SimulationRun.objects.get(pk=r.json()["job"]["id"])
    assert planner.post(f"/api/v1/runs/{job.pk}/cancel/").status_code == 200
    upload = CalibrationUpload.objects.get(pk=r.json()["id"])
    assert upload.status == "failed" and "cancelled" in upload.error
    assert services.run_execute(run_id=job.pk) is None  # a late delivery does nothing


def test_a_calibration_jobs_run_page_renders(world, planner, client) -> None:
    r = _upload(planner, world["x"]["fleet"], content=_nccl())
    _jobs()
    client.force_login(world["users"]["viewer"])
    page = client.get(f"/runs/{r.json()['job']['id']}/")
    assert page.status_code == 200
    assert client.get("/runs/").status_code == 200
