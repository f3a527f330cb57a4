"""Several calibration files, or a manifest, in one request (issue #24): ``POST /api/v1/calibration-files/batch/``.

* three files in one request are three files, each with its own queued import job, which read them as a worker would;
* a manifest (the engine's JSON, or YAML, or CSV) says each file's kind, run scenario and settings: nothing pasted by
  hand per file;
* a bad file anywhere refuses the whole request with a 400 naming it (``files[1]``, its name, the line) or the
  manifest entry, and nothing is stored or queued; so do the per-file, total, count and admission limits;
* another team neither sees the files nor uploads to the fleet; a viewer cannot upload;
* a batch repeated with its Idempotency-Key answers the first batch's files and jobs.
"""

from __future__ import annotations

import copy
import csv
import io
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.paths import ROOT

pytestmark = pytest.mark.django_db

EXAMPLES = ROOT / "examples" / "calibration"
MANIFEST = json.loads((EXAMPLES / "manifest.json").read_text(encoding="utf-8"))
URL = "/api/v1/calibration-files/batch/"
NCCL_FILES = ("a100_all_reduce_32ranks.txt", "a100_all_gather_32ranks.txt", "a100_reduce_scatter_32ranks.txt")
RUN_ID = "llama7b-32gpu-bf16"


def _client(user: Any) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


def _part(name: str, data: bytes | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data if data is not None else (EXAMPLES / name).read_bytes(),
                              content_type="text/plain")


def _run() -> dict[str, Any]:
    run = next(r for r in MANIFEST["runs"] if r["id"] == RUN_ID)
    scenario = {k: copy.deepcopy(run["scenario"][k]) for k in ("model", "training", "parallelism")}
    scenario["cluster"] = {"gpus": run["scenario"]["cluster"]["gpus"]}
    return {"id": run["id"], "file": run["file"], "scenario": scenario}


def _manifest() -> dict[str, Any]:
    """Two nccl-tests files and one step log, as the engine's manifest names them (the fleet section is ignored)."""
    return {"fleet": MANIFEST["fleet"], "about": "test",
            "nccl": [{"file": NCCL_FILES[0], "collective": "all_reduce", "nodes": 5},
                     {"file": f"logs/{NCCL_FILES[1]}"}],
            "runs": [{**_run(), "parse": {"warmup_steps": 2}, "format": "csv"}]}


def _files(*names: str) -> list[SimpleUploadedFile]:
    return [_part(n) for n in names]


def _post(client: APIClient, fleet: Any, files: list[SimpleUploadedFile], manifest: SimpleUploadedFile | None = None,
          key: str | None = None, **fields: Any) -> Any:
    body: dict[str, Any] = {"fleet": fleet.pk, "files": files, **fields}
    if manifest is not None:
        body["manifest"] = manifest
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(URL, body, format="multipart", **headers)


def _run_jobs() -> list[Any]:
    from simulations import services
    from simulations.models import JobKind, SimulationRun

    ids = list(SimulationRun.objects.filter(kind__in=JobKind.values, status="queued").order_by("pk")
               .values_list("pk", flat=True))
    return [services.run_execute(run_id=i) for i in ids]


def _counts() -> tuple[int, int]:
    from planning.models import CalibrationUpload
    from simulations.models import SimulationRun

    return CalibrationUpload.objects.count(), SimulationRun.objects.count()


def test_three_files_in_one_request_are_three_import_jobs(world) -> None:
    planner = _client(world["users"]["planner"])
    fleet = world["x"]["fleet"]
    r = _post(planner, fleet, _files(*NCCL_FILES), kind="nccl-tests")
    assert r.status_code == 202, r.content
    files = r.json()["files"]
    assert [f["filename"] for f in files] == list(NCCL_FILES)
    assert {f["status"] for f in files} == {"pending"} and {f["kind"] for f in files} == {"nccl-tests"}
    jobs = {f["job"]["id"] for f in files}
    assert len(jobs) == 3 and {f["job"]["status"] for f in files} == {"queued"}
    for job_id in jobs:
        job = planner.get(f"/api/v1/runs/{job_id}/").json()
        assert job["kind"] == "cal-import" and job["status"] == "queued"
    _run_jobs()
    listed = planner.get(f"/api/v1/calibration-files/?fleet={fleet.pk}").json()["results"]
    read = {f["filename"]: f for f in listed}
    assert set(read) == set(NCCL_FILES) and {f["status"] for f in listed} == {"ready"}
    assert {read[n]["summary"]["collective"] for n in NCCL_FILES} == {"all_reduce", "all_gather", "reduce_scatter"}


def test_a_manifest_says_what_each_file_is(world) -> None:
    from planning.models import CalibrationUpload

    planner = _client(world["users"]["planner"])
    fleet = world["x"]["fleet"]
    manifest = _part("manifest.json", json.dumps(_manifest()).encode())
    r = _post(planner, fleet, _files(NCCL_FILES[0], NCCL_FILES[1], _run()["file"]), manifest=manifest)
    assert r.status_code == 202, r.content
    files = {f["filename"]: f for f in r.json()["files"]}
    assert files[_run()["file"]]["kind"] == "step-log" and files[_run()["file"]]["label"] == RUN_ID
    assert files[NCCL_FILES[1]]["kind"] == "nccl-tests"  # "logs/<name>" in the manifest matches the upload's name
    stored = CalibrationUpload.objects.get(pk=files[_run()["file"]]["id"])
    assert stored.scenario["model"] == _run()["scenario"]["model"] and stored.scenario["cluster"]["gpus"] == 32
    assert stored.options["warmup_steps"] == 2
    _run_jobs()
    after = {f["filename"]: planner.get(f"/api/v1/calibration-files/{f['id']}/").json() for f in files.values()}
    assert {f["status"] for f in after.values()} == {"ready"}, after
    assert after[NCCL_FILES[0]]["summary"]["nodes"] == 5  # the manifest's nodes win over the header's, as in calibrate
    assert after[NCCL_FILES[1]]["summary"]["collective"] == "all_gather"
    assert after[_run()["file"]]["summary"]["steps_used"] > 0
    fit = planner.post("/api/v1/calibration-profiles/", {"fleet": fleet.pk}, format="json")
    assert fit.status_code == 202, fit.content  # every file of the batch is ready to fit


def _yaml_manifest() -> bytes:
    import yaml

    return yaml.safe_dump(_manifest()).encode()


def _csv_manifest() -> bytes:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["file", "kind", "label", "collective", "nodes", "scenario", "warmup_steps"])
    w.writerow([NCCL_FILES[0], "nccl-tests", "", "all_reduce", "5", "", ""])
    w.writerow([NCCL_FILES[1], "nccl-tests", "", "", "", "", ""])
    w.writerow([_run()["file"], "step-log", RUN_ID, "", "", json.dumps(_run()["scenario"]), "2"])
    return out.getvalue().encode()


@pytest.mark.parametrize("name,data", [("manifest.yaml", _yaml_manifest), ("manifest.csv", _csv_manifest),
                                       ("manifest", _csv_manifest)])
def test_yaml_and_csv_manifests_read_the_same(world, name: str, data: Any) -> None:
    from planning.models import CalibrationUpload

    planner = _client(world["users"]["planner"])
    r = _post(planner, world["x"]["fleet"], _files(NCCL_FILES[0], NCCL_FILES[1], _run()["file"]),
              manifest=_part(name, data()))
    assert r.status_code == 202, r.content
    kinds = {f["filename"]: f["kind"] for f in r.json()["files"]}
    assert kinds == {NCCL_FILES[0]: "nccl-tests", NCCL_FILES[1]: "nccl-tests", _run()["file"]: "step-log"}
    step = CalibrationUpload.objects.get(filename=_run()["file"])
    assert step.label == RUN_ID and step.options["warmup_steps"] == 2 and step.scenario["training"]
    assert CalibrationUpload.objects.get(filename=NCCL_FILES[0]).options == {"collective": "all_reduce", "nodes": 5}


@pytest.mark.parametrize("second,field,says", [
    (b"# nccl-tests\n\xff\xfe broken\n", "files[1]", "line 2: not UTF-8"),
    (b"  \n\n", "files[1]", "empty"),
    (b"ok\nstill ok\n\x00 here\n", "files[1]", "line 3: NUL"),
])
def test_a_bad_second_file_refuses_the_whole_request(world, second: bytes, field: str, says: str) -> None:
    planner = _client(world["users"]["planner"])
    before = _counts()
    files = [_part(NCCL_FILES[0]), _part("broken.txt", second), _part(NCCL_FILES[2])]
    r = _post(planner, world["x"]["fleet"], files, kind="nccl-tests")
    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    assert list(errors) == [field] and says in errors[field][0] and "broken.txt" in errors[field][0], errors
    assert _counts() == before  # no file stored, no job queued


def test_a_bad_scenario_in_the_manifest_names_the_entry_and_stores_nothing(world) -> None:
    planner = _client(world["users"]["planner"])
    manifest = _manifest()
    manifest["runs"][0]["scenario"]["model"]["layers"] = -3
    before = _counts()
    r = _post(planner, world["x"]["fleet"], _files(NCCL_FILES[0], NCCL_FILES[1], _run()["file"]),
              manifest=_part("manifest.json", json.dumps(manifest).encode()))
    assert r.status_code == 400, r.content
    (field,) = r.json()["errors"]
    assert field.startswith("manifest.runs[0].scenario.model.layers"), r.json()
    assert _counts() == before  # the two nccl-tests files stored before it were rolled back, their jobs never sent


@pytest.mark.parametrize("manifest,field,says", [
    ({"nccl": [{"file": "missing.txt"}]}, "manifest.nccl[0].file", "not among the uploaded files"),
    ({"runs": [{"file": NCCL_FILES[0]}]}, "manifest.runs[0].scenario", "scenario document"),
    ({"nccl": [{"file": NCCL_FILES[0], "ranks": "many"}]}, "manifest.nccl[0].ranks", "integer from 1"),
    ({"runs": [{**_run(), "file": NCCL_FILES[0], "parse": {"gpus": 0}}]}, "manifest.runs[0].parse.gpus", "from 1"),
    ({"nccl": [{"file": NCCL_FILES[0], "ranks": 0}]}, "manifest.nccl[0].ranks", "integer from 1"),
    ({"nccl": [{"file": NCCL_FILES[0]}, {"file": NCCL_FILES[0]}]}, "manifest.nccl[1].file", "already named"),
    ({"nccl": []}, "manifest", "names no files"),
])
def test_manifest_mistakes_are_400_naming_the_entry(world, manifest: Any, field: str, says: str) -> None:
    planner = _client(world["users"]["planner"])
    before = _counts()
    r = _post(planner, world["x"]["fleet"], _files(NCCL_FILES[0]),
              manifest=_part("m.json", json.dumps(manifest).encode()))
    assert r.status_code == 400 and says in r.json()["errors"][field][0], r.content
    assert _counts() == before


@pytest.mark.parametrize("name,text,says", [
    ("m.json", '{"nccl": [\n{"file": "a.txt",}\n]}', "line 2"),
    ("m.yaml", "nccl:\n  - &a {file: a.txt}\n  - *a\n", "line 2: YAML anchors"),
    ("m.yaml", "nccl: [\n  {file: a.txt\n", "not valid YAML"),
    ("m.csv", "file,kind\na.txt,nccl-tests\nb.txt,nccl\n", "must be one of"),
    ("m.csv", "file,kind,colour\na.txt,nccl-tests,red\n", "line 1: unknown column 'colour'"),
])
def test_unreadable_manifests_name_the_line(world, name: str, text: str, says: str) -> None:
    planner = _client(world["users"]["planner"])
    r = _post(planner, world["x"]["fleet"], [_part("a.txt", b"x\n"), _part("b.txt", b"y\n")],
              manifest=_part(name, text.encode()))
    assert r.status_code == 400, r.content
    assert says in json.dumps(r.json()["errors"]), r.json()
    if name == "m.csv" and "one of" in says:
        assert list(r.json()["errors"]) == ["manifest[line 3].kind"]


def test_a_file_the_manifest_does_not_name_needs_a_kind(world) -> None:
    planner = _client(world["users"]["planner"])
    manifest = _part("m.json", json.dumps({"nccl": [{"file": NCCL_FILES[0]}]}).encode())
    r = _post(planner, world["x"]["fleet"], _files(NCCL_FILES[0], NCCL_FILES[1]), manifest=manifest)
    assert r.status_code == 400 and "not named by the manifest" in r.json()["errors"]["files[1]"][0]
    r = _post(planner, world["x"]["fleet"], _files(NCCL_FILES[0], NCCL_FILES[1]),
              manifest=_part("m.json", json.dumps({"nccl": [{"file": NCCL_FILES[0]}]}).encode()), kind="nccl-tests")
    assert r.status_code == 202 and len(r.json()["files"]) == 2


def test_limits_apply_per_file_in_total_and_in_number(world, settings) -> None:
    planner = _client(world["users"]["planner"])
    fleet = world["x"]["fleet"]
    before = _counts()
    settings.FP_CALIBRATION_MAX_UPLOAD_BYTES = 64
    r = _post(planner, fleet, [_part("a.txt", b"a\n" * 8), _part("big.txt", b"b\n" * 40)], kind="nccl-tests")
    assert r.status_code == 400 and "big.txt" in r.json()["errors"]["files[1]"][0] and "64-byte" in r.content.decode()
    settings.FP_CALIBRATION_MAX_UPLOAD_BYTES = 4096
    settings.FP_CALIBRATION_MAX_BATCH_BYTES = 100
    r = _post(planner, fleet, [_part(f"f{i}.txt", b"x\n" * 20) for i in range(3)], kind="nccl-tests")
    assert r.status_code == 400 and "in all" in r.json()["errors"]["files"][0]
    settings.FP_CALIBRATION_MAX_BATCH_BYTES = 10**9
    r = _post(planner, fleet, [_part(f"f{i}.txt", b"x\n") for i in range(61)], kind="nccl-tests")
    assert r.status_code == 400 and "at most 60 files" in r.json()["errors"]["files"][0]
    assert _counts() == before


def test_admission_counts_every_job_of_the_batch(world, settings) -> None:
    planner = _client(world["users"]["planner"])
    settings.FP_TEAM_MAX_ACTIVE_RUNS = 2
    before = _counts()
    r = _post(planner, world["x"]["fleet"], _files(*NCCL_FILES), kind="nccl-tests")
    assert r.status_code == 429 and r.has_header("Retry-After"), r.content
    assert _counts() == before
    assert _post(planner, world["x"]["fleet"], _files(*NCCL_FILES[:2]), kind="nccl-tests").status_code == 202


def test_another_team_cannot_see_or_upload_and_a_viewer_cannot_upload(world) -> None:
    x, y = world["x"], world["y"]
    planner = _client(world["users"]["planner"])
    r = _post(planner, x["fleet"], _files(*NCCL_FILES), kind="nccl-tests")
    assert r.status_code == 202
    ids = [f["id"] for f in r.json()["files"]]
    other = _client(world["other_admin"])
    assert all(other.get(f"/api/v1/calibration-files/{i}/").status_code == 404 for i in ids)
    assert other.get("/api/v1/calibration-files/").json()["count"] == 0
    assert all(other.get(f"/api/v1/runs/{f['job']['id']}/").status_code == 404 for f in r.json()["files"])
    before = _counts()
    refused = _post(other, x["fleet"], _files(NCCL_FILES[0]), kind="nccl-tests")
    assert refused.status_code == 400 and "fleet" in refused.json()["errors"]  # "not found" for that team
    viewer = _client(world["users"]["viewer"])
    assert _post(viewer, x["fleet"], _files(NCCL_FILES[0]), kind="nccl-tests").status_code == 403
    assert _counts() == before
    mine = _post(other, y["fleet"], _files(NCCL_FILES[0]), kind="nccl-tests")
    assert mine.status_code == 202 and mine.json()["files"][0]["team"] == y["fleet"].team.slug
    assert planner.get(f"/api/v1/calibration-files/{mine.json()['files'][0]['id']}/").status_code == 404


def test_a_batch_repeated_with_its_idempotency_key_is_stored_once(world) -> None:
    planner = _client(world["users"]["planner"])
    fleet = world["x"]["fleet"]
    first = _post(planner, fleet, _files(*NCCL_FILES), kind="nccl-tests", key="q3-nccl")
    before = _counts()
    again = _post(planner, fleet, _files(*NCCL_FILES), kind="nccl-tests", key="q3-nccl")
    assert again.status_code == 202 and [f["id"] for f in again.json()["files"]] == [f["id"] for f in
                                                                                       first.json()["files"]]
    assert _counts() == before
    _run_jobs()
    done = _post(planner, fleet, _files(*NCCL_FILES), kind="nccl-tests", key="q3-nccl")
    assert done.status_code == 200 and {f["status"] for f in done.json()["files"]} == {"ready"}
    other = _post(planner, fleet, _files(*NCCL_FILES[:2]), kind="nccl-tests", key="q3-nccl")
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["errors"]


def test_the_shipped_example_manifest_uploads_as_it_is(world) -> None:
    """docs/api.md's example: examples/calibration/ with its manifest.json, every file imported by its own job."""
    planner = _client(world["users"]["planner"])
    names = [e["file"] for e in MANIFEST["nccl"]] + [r["file"] for r in MANIFEST["runs"]]
    r = _post(planner, world["x"]["fleet"], _files(*names), manifest=_part("manifest.json"))
    assert r.status_code == 202, r.content
    files = r.json()["files"]
    assert len(files) == len(names) == len({f["job"]["id"] for f in files})
    assert {f["filename"]: f["kind"] for f in files} == {
        **{e["file"]: "nccl-tests" for e in MANIFEST["nccl"]}, **{r["file"]: "step-log" for r in MANIFEST["runs"]}}
    _run_jobs()
    after = [planner.get(f"/api/v1/calibration-files/{f['id']}/").json() for f in files]
    assert all(f["status"] == "ready" for f in after), [(f["filename"], f["error"]) for f in after]


def test_the_same_batch_as_json_with_the_manifest_as_a_document(world) -> None:
    planner = _client(world["users"]["planner"])
    names = (NCCL_FILES[0], NCCL_FILES[1], _run()["file"])
    body = {"fleet": world["x"]["fleet"].pk, "manifest": _manifest(),
            "files": [{"filename": n, "content": (EXAMPLES / n).read_text(encoding="utf-8")} for n in names]}
    r = planner.post(URL, body, format="json")
    assert r.status_code == 202, r.content
    assert {f["filename"]: f["kind"] for f in r.json()["files"]} == {
        NCCL_FILES[0]: "nccl-tests", NCCL_FILES[1]: "nccl-tests", _run()["file"]: "step-log"}
    before = _counts()
    body["files"][1]["content"] = "   \n"
    r = planner.post(URL, body, format="json")
    assert r.status_code == 400 and "empty" in r.json()["errors"]["files[1]"][0] and _counts() == before
    r = planner.post(URL, {**body, "files": [body["files"][0]] * 61}, format="json")
    assert r.status_code == 400 and "no more than 60" in json.dumps(r.json()["errors"]) and _counts() == before


def test_more_parts_than_django_takes_is_a_400_not_a_500(world) -> None:
    planner = _client(world["users"]["planner"])
    planner.raise_request_exception = False
    before = _counts()
    r = _post(planner, world["x"]["fleet"], [_part(f"f{i}.txt", b"x\n") for i in range(101)], kind="nccl-tests")
    assert r.status_code == 400 and "too many parts" in r.json()["errors"]["files"][0], r.content
    assert _counts() == before


def test_any_endpoint_refuses_more_parts_than_django_takes_with_a_400(world) -> None:
    """The single-file upload (and every multipart endpoint) answers Django's too-many-parts refusal with the
    API's 400 body, not a 500 (core/api/errors.py: SuspiciousOperation)."""
    planner = _client(world["users"]["planner"])
    planner.raise_request_exception = False
    before = _counts()
    data = {"fleet": world["x"]["fleet"].pk, "kind": "nccl-tests"}
    data.update({f"extra{i}": "x" for i in range(1100)})  # past DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000)
    r = planner.post("/api/v1/calibration-files/", data, format="multipart")
    assert r.status_code == 400, r.content
    assert r.json()["status"] == 400 and r.json()["codes"]["detail"] == ["parse_error"]
    assert _counts() == before
