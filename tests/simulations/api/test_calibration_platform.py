"""Calibration on the platform (issue #16): team-owned files and versioned profiles, size-limited uploads,
scenarios that carry the fleet's profile, results naming its version, re-evaluation when it changes.

Uploads and fits are jobs (issue #23): a POST answers 202 with the job; ``_run_jobs`` executes the queued jobs
in-process, as a worker would."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.paths import ROOT

pytestmark = pytest.mark.django_db

EXAMPLES = ROOT / "examples" / "calibration"
MANIFEST = json.loads((EXAMPLES / "manifest.json").read_text(encoding="utf-8"))


def _client(user: Any) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


def _nccl_text(ranks: int = 32, collective: str = "all_reduce") -> str:
    entry = next(e for e in MANIFEST["nccl"] if e["ranks"] == ranks and e["collective"] == collective)
    return (EXAMPLES / entry["file"]).read_text(encoding="utf-8")


def _run_entry(rid: str = "llama7b-32gpu-bf16") -> dict[str, Any]:
    return next(r for r in MANIFEST["runs"] if r["id"] == rid)


def _run_jobs() -> list[Any]:
    """Execute every queued calibration job in this process (the worker's part)."""
    from simulations import services
    from simulations.models import JobKind, SimulationRun

    ids = list(SimulationRun.objects.filter(kind__in=JobKind.values, status="queued").order_by("pk")
               .values_list("pk", flat=True))
    return [services.run_execute(run_id=i) for i in ids]


def _upload(client: APIClient, fleet: Any, kind: str = "nccl-tests", content: str | None = None, run: bool = True,
            **extra: Any) -> Any:
    body = {"fleet": fleet.pk, "kind": kind, "content": content if content is not None else _nccl_text(), **extra}
    r = client.post("/api/v1/calibration-files/", body, format="json")
    if run and r.status_code == 202:
        _run_jobs()
    return r


def _file(client: APIClient, r: Any) -> dict[str, Any]:
    """The uploaded file as it is now (after its import job)."""
    return client.get(f"/api/v1/calibration-files/{r.json()['id']}/").json()


def _fit_now(client: APIClient, fleet: Any, **body: Any) -> Any:
    """POST a fit (202 + job), run the job, and answer the profile it made (the API's detail)."""
    r = client.post("/api/v1/calibration-profiles/", {"fleet": fleet.pk, **body}, format="json")
    assert r.status_code == 202, r.content
    _run_jobs()
    job = client.get(r.json()["url"]).json()
    assert job["status"] == "succeeded", job
    return client.get(f"/api/v1/calibration-profiles/{job['result']['profile']}/")


def _step_upload(client: APIClient, fleet: Any) -> Any:
    run = _run_entry()
    scenario = {k: copy.deepcopy(run["scenario"][k]) for k in ("model", "training", "parallelism")}
    scenario["cluster"] = {"gpus": run["scenario"]["cluster"]["gpus"]}
    return _upload(client, fleet, kind="step-log", content=(EXAMPLES / run["file"]).read_text(encoding="utf-8"),
                   scenario=scenario, label=run["id"])


def test_upload_parse_and_fit_versions_are_team_owned_and_change_logged(world) -> None:
    from planning.models import ObjectChange

    x, y = world["x"], world["y"]
    planner = _client(world["users"]["planner"])
    r = _upload(planner, x["fleet"], label="ar-32", run=False)
    assert r.status_code == 202, r.content
    assert r.json()["status"] == "pending" and r.json()["job"]["status"] == "queued"
    assert r["Location"].endswith(f"/api/v1/runs/{r.json()['job']['id']}/")
    _run_jobs()
    f = _file(planner, r)
    assert f["status"] == "ready" and f["job"]["status"] == "succeeded" and f["job"]["progress"] == 100
    assert f["summary"]["collective"] == "all_reduce" and f["summary"]["ranks"] == 32
    assert _file(planner, _step_upload(planner, x["fleet"]))["status"] == "ready"
    fit = _fit_now(planner, x["fleet"], name="acceptance")
    body = fit.json()
    assert body["version"] == 1
    assert body["summary"]["collectives"][0]["eta_sigma"] > 0
    assert body["profile"]["sources"][0]["sha256"]
    assert _fit_now(planner, x["fleet"]).json()["version"] == 2
    assert ObjectChange.objects.filter(object_type="calibration-profile", object_id=body["id"]).exists()
    # another team sees none of it and cannot write to it
    other = _client(world["other_admin"])
    assert other.get(f"/api/v1/calibration-profiles/{body['id']}/").status_code == 404
    assert other.get(f"/api/v1/calibration-files/{r.json()['id']}/").status_code == 404
    assert other.get("/api/v1/calibration-files/").json()["count"] == 0
    assert _upload(other, x["fleet"]).status_code == 400  # the fleet id is "not found" for that team
    assert other.post("/api/v1/calibration-profiles/", {"fleet": x["fleet"].pk}, format="json").status_code == 400
    assert _upload(other, y["fleet"]).status_code == 202
    # a viewer reads but does not write
    viewer = _client(world["users"]["viewer"])
    assert viewer.get(f"/api/v1/calibration-profiles/{body['id']}/").status_code == 200
    assert _upload(viewer, x["fleet"]).status_code == 403


@pytest.mark.parametrize("content,field,match", [
    ("", "content", "blank"),
    ("   \n", "file", "empty"),
])
def test_unreadable_uploads_are_400_at_once(world, content: str, field: str, match: str) -> None:
    r = _upload(_client(world["users"]["planner"]), world["x"]["fleet"], content=content)
    assert r.status_code == 400 and match in json.dumps(r.json()["errors"][field]), r.content


def test_malformed_file_is_refused_by_its_job_naming_the_line(world) -> None:
    planner = _client(world["users"]["planner"])
    r = _upload(planner, world["x"]["fleet"], content="hello\n")
    assert r.status_code == 202, r.content
    f = _file(planner, r)
    assert f["status"] == "failed" and "line 1" in f["error"] and f["summary"] == {}
    job = planner.get(f["job"]["url"]).json()
    assert job["status"] == "failed" and job["error_field"] == "file" and "line 1" in job["error"]


def test_truncated_nccl_file_names_its_line(world) -> None:
    lines = _nccl_text().splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#"))
    text = "\n".join([*lines[: row + 4], lines[row + 4][:60]])
    planner = _client(world["users"]["planner"])
    f = _file(planner, _upload(planner, world["x"]["fleet"], content=text))
    assert f["status"] == "failed"
    assert f"line {row + 5}" in f["error"] and "truncated" in f["error"]


def test_uploads_are_size_limited_and_must_be_text(world, settings) -> None:
    settings.FP_CALIBRATION_MAX_UPLOAD_BYTES = 1000
    planner = _client(world["users"]["planner"])
    r = _upload(planner, world["x"]["fleet"])
    assert r.status_code == 400 and "exceeds the 1000-byte limit" in json.dumps(r.json())
    settings.FP_CALIBRATION_MAX_UPLOAD_BYTES = 4 << 20
    from django.core.files.uploadedfile import SimpleUploadedFile

    f = SimpleUploadedFile("x.txt", b"\xff\xfe\x00garbage", content_type="text/plain")
    r = planner.post("/api/v1/calibration-files/", {"fleet": world["x"]["fleet"].pk, "kind": "nccl-tests", "file": f},
                     format="multipart")
    assert r.status_code == 400 and "UTF-8" in json.dumps(r.json())


def test_step_log_needs_the_run_scenario(world) -> None:
    run = _run_entry()
    r = _upload(_client(world["users"]["planner"]), world["x"]["fleet"], kind="step-log",
                content=(EXAMPLES / run["file"]).read_text(encoding="utf-8"))
    assert r.status_code == 400 and "scenario" in r.json()["errors"]


def _fit(world: Any) -> Any:
    planner = _client(world["users"]["planner"])
    assert _upload(planner, world["x"]["fleet"]).status_code == 202
    assert _step_upload(planner, world["x"]["fleet"]).status_code == 202
    return _fit_now(planner, world["x"]["fleet"]).json()


def test_scenarios_on_the_fleet_carry_the_profile_unless_told_not_to(world) -> None:
    from planning import services

    x = world["x"]
    assert "calibration" not in services.scenario_document(scenario=x["fleet_scenario"])
    prof = _fit(world)
    doc = services.scenario_document(scenario=x["fleet_scenario"])
    assert doc["calibration"]["version"] == prof["version"] and "borrow" not in doc["calibration"]
    assert "calibration" not in services.scenario_document(scenario=x["scenario"])  # ad-hoc cluster, no fleet
    admin = world["users"]["admin"]
    off = services.scenario_update(scenario=x["fleet_scenario"], user=admin, use_calibration=False)
    assert "calibration" not in services.scenario_document(scenario=off)
    # other fleets are unchanged: team y's scenario on its own fleet carries nothing
    assert "calibration" not in services.scenario_document(scenario=world["y"]["fleet_scenario"])
    borrowed = services.scenario_update(scenario=x["scenario"], user=admin, calibration_fleet=x["fleet"])
    assert services.scenario_document(scenario=borrowed)["calibration"]["borrow"] is True
    with pytest.raises(Exception, match="calibration_fleet"):
        services.scenario_update(scenario=x["scenario"], user=admin, calibration_fleet=world["y"]["fleet"])


def test_results_name_the_profile_version_and_a_new_profile_reevaluates(world, django_capture_on_commit_callbacks,
                                                                          monkeypatch) -> None:
    from planning import services as planning
    from simulations import services

    monkeypatch.setattr(services.execution, "enqueue_runs", lambda ids: None, raising=False)
    x = world["x"]
    admin = world["users"]["admin"]
    prof = _fit(world)
    scenario = planning.scenario_update(scenario=x["fleet_scenario"], user=admin, watched=True)
    run = services.run_submit(scenario=scenario, user=admin, kind="predict", force=True)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    result: dict[str, Any] = run.result or {}
    assert any(f"v{prof['version']}" in n for n in result["notes"]), result["notes"]
    assert run.input_snapshot["document"]["calibration"]["version"] == prof["version"]
    from django.test import Client

    page = Client()
    page.force_login(admin)
    html = page.get(f"/runs/{run.pk}/").content.decode()
    assert f"calibrated with {prof['name']}" in html and f"v{prof['version']}" in html
    assert services.scenario_needs_reevaluation(scenario=scenario)[0] is False
    planner = _client(world["users"]["planner"])
    r = planner.post("/api/v1/calibration-profiles/", {"fleet": x["fleet"].pk}, format="json")
    assert r.status_code == 202
    with django_capture_on_commit_callbacks(execute=True):
        _run_jobs()
    from simulations.models import ReEvaluation

    reeval = ReEvaluation.objects.filter(scenario=scenario).latest("pk")
    assert any(reason.startswith("calibration ") and reason.endswith(f"v{prof['version'] + 1}")
               for reason in reeval.reasons), reeval.reasons


def test_fleet_calibration_page_shows_fit_and_is_team_scoped(world, client) -> None:
    x = world["x"]
    prof = _fit(world)
    client.force_login(world["users"]["viewer"])
    page = client.get(f"/fleets/{x['fleet'].pk}/calibration/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"Profile v{prof['version']}" in html and 'id="fitted-collectives"' in html
    assert 'data-chart="chart-nccl-0"' in html and 'data-chart="chart-steps"' in html
    assert 'id="upload-form"' not in html  # a viewer cannot upload
    assert client.post(f"/fleets/{x['fleet'].pk}/calibration/", {"action": "fit"}).status_code == 403
    client.force_login(world["other_admin"])
    assert client.get(f"/fleets/{x['fleet'].pk}/calibration/").status_code == 404
    client.force_login(world["users"]["planner"])
    from django.core.files.uploadedfile import SimpleUploadedFile

    bad = SimpleUploadedFile("bad.txt", b"# only a comment\nnot a row\n")
    r = client.post(f"/fleets/{x['fleet'].pk}/calibration/", {"kind": "nccl-tests", "file": bad})
    assert r.status_code == 302  # stored; its import job reads it
    page = client.get(f"/fleets/{x['fleet'].pk}/calibration/").content.decode()
    assert "importing" in page and 'data-polling="1"' in page  # the page follows the job while it runs
    _run_jobs()
    page = client.get(f"/fleets/{x['fleet'].pk}/calibration/").content.decode()
    assert "refused" in page and "line 2" in page and 'data-polling="1"' not in page
    good = SimpleUploadedFile("ar.txt", _nccl_text().encode())
    r = client.post(f"/fleets/{x['fleet'].pk}/calibration/", {"kind": "nccl-tests", "file": good})
    assert r.status_code == 302
    _run_jobs()
    r = client.post(f"/fleets/{x['fleet'].pk}/calibration/", {"action": "fit", "name": "portal fit"})
    assert r.status_code == 302
    partial = client.get(f"/fleets/{x['fleet'].pk}/calibration/?partial=jobs", HTTP_HX_REQUEST="true")
    assert partial.status_code == 200 and 'id="fit-jobs"' in partial.content.decode()
    _run_jobs()
    done = client.get(f"/fleets/{x['fleet'].pk}/calibration/?partial=jobs", HTTP_HX_REQUEST="true")
    assert done.status_code == 204 and done["HX-Refresh"] == "true"  # nothing runs any more: reload the page
    assert "Profile v2" in client.get(f"/fleets/{x['fleet'].pk}/calibration/").content.decode()


def test_scenario_calibration_page_opts_out_and_borrows(world, client) -> None:
    from planning import services

    x = world["x"]
    _fit(world)
    client.force_login(world["users"]["viewer"])
    detail = client.get(f"/scenarios/{x['fleet_scenario'].pk}/").content.decode()
    assert 'id="calibration-summary"' in detail and "v1" in detail
    assert client.post(f"/scenarios/{x['fleet_scenario'].pk}/calibration/", {}).status_code == 403
    client.force_login(world["users"]["planner"])
    r = client.post(f"/scenarios/{x['fleet_scenario'].pk}/calibration/", {"calibration_fleet": ""})
    assert r.status_code == 302
    x["fleet_scenario"].refresh_from_db()
    assert "calibration" not in services.scenario_document(scenario=x["fleet_scenario"])  # opted out
    r = client.post(f"/scenarios/{x['scenario'].pk}/calibration/",
                    {"use_calibration": "on", "calibration_fleet": str(x["fleet"].pk)})
    assert r.status_code == 302
    x["scenario"].refresh_from_db()
    assert services.scenario_document(scenario=x["scenario"])["calibration"]["borrow"] is True
    r = client.post(f"/scenarios/{x['scenario'].pk}/calibration/",
                    {"use_calibration": "on", "calibration_fleet": str(world["y"]["fleet"].pk)})
    assert r.status_code == 400 and "no calibration profile in this team" in r.content.decode()
