"""The fleet calibration page takes several files at once and a manifest (issue #24): each file its own import job;
a bad file or manifest entry refuses the whole form (a 400 page naming it) and stores nothing."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.paths import ROOT

pytestmark = pytest.mark.django_db

EXAMPLES = ROOT / "examples" / "calibration"
MANIFEST = json.loads((EXAMPLES / "manifest.json").read_text(encoding="utf-8"))
NCCL = ("a100_all_reduce_32ranks.txt", "a100_all_gather_32ranks.txt")


def _part(name: str, data: bytes | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data if data is not None else (EXAMPLES / name).read_bytes())


def _counts() -> tuple[int, int]:
    from planning.models import CalibrationUpload
    from simulations.models import SimulationRun

    return CalibrationUpload.objects.count(), SimulationRun.objects.count()


def _run_jobs() -> None:
    from simulations import services
    from simulations.models import JobKind, SimulationRun

    for i in list(SimulationRun.objects.filter(kind__in=JobKind.values, status="queued").values_list("pk", flat=True)):
        services.run_execute(run_id=i)


@pytest.fixture
def planner(world: dict[str, Any], client: Any) -> Any:
    client.force_login(world["users"]["planner"])
    return client


def test_the_upload_form_takes_several_files_and_a_manifest(world: dict[str, Any], planner: Any) -> None:
    fleet = world["x"]["fleet"]
    html = planner.get(f"/fleets/{fleet.pk}/calibration/").content.decode()
    assert 'name="file" multiple' in html and 'name="manifest"' in html
    r = planner.post(f"/fleets/{fleet.pk}/calibration/", {"kind": "nccl-tests", "file": [_part(n) for n in NCCL]})
    assert r.status_code == 302, r.content.decode()[:2000]
    from planning.models import CalibrationUpload

    uploads = list(CalibrationUpload.objects.filter(fleet=fleet).order_by("pk"))
    assert [u.filename for u in uploads] == list(NCCL) and len({u.job_id for u in uploads}) == 2
    page = planner.get(f"/fleets/{fleet.pk}/calibration/").content.decode()
    assert "2 files stored" in page and page.count('data-status="pending"') == 2
    _run_jobs()
    assert planner.get(f"/fleets/{fleet.pk}/calibration/").content.decode().count('data-status="ready"') == 2


def test_a_manifest_gives_each_step_log_its_scenario(world: dict[str, Any], planner: Any) -> None:
    from planning.models import CalibrationUpload

    fleet = world["x"]["fleet"]
    run = next(r for r in MANIFEST["runs"] if r["id"] == "llama7b-32gpu-bf16")
    scenario = {k: copy.deepcopy(run["scenario"][k]) for k in ("model", "training", "parallelism")}
    manifest = {"nccl": [{"file": NCCL[0]}], "runs": [{"id": run["id"], "file": run["file"],
                                                       "scenario": {**scenario, "cluster": {"gpus": 32}}}]}
    r = planner.post(f"/fleets/{fleet.pk}/calibration/", {
        "kind": "", "file": [_part(NCCL[0]), _part(run["file"])],
        "manifest": _part("manifest.json", json.dumps(manifest).encode())})
    assert r.status_code == 302, r.content.decode()[:2000]
    step = CalibrationUpload.objects.get(fleet=fleet, kind="step-log")
    assert step.label == run["id"] and step.scenario["model"] == scenario["model"]
    _run_jobs()
    assert set(CalibrationUpload.objects.filter(fleet=fleet).values_list("status", flat=True)) == {"ready"}


def test_a_bad_second_file_refuses_the_form_and_stores_nothing(world: dict[str, Any], planner: Any) -> None:
    fleet = world["x"]["fleet"]
    before = _counts()
    r = planner.post(f"/fleets/{fleet.pk}/calibration/", {
        "kind": "nccl-tests", "file": [_part(NCCL[0]), _part("bad.txt", b"fine\n\xc3\x28 not utf-8\n")]})
    assert r.status_code == 400
    html = r.content.decode()
    assert "files[1]" in html and "bad.txt" in html and "line 2: not UTF-8" in html
    assert _counts() == before
    r = planner.post(f"/fleets/{fleet.pk}/calibration/", {
        "kind": "", "file": [_part(NCCL[0])], "manifest": _part("m.csv", b"file,kind\nother.txt,nccl-tests\n")})
    assert r.status_code == 400 and "manifest[line 2].file" in r.content.decode()
    assert _counts() == before


def test_a_viewer_and_another_team_cannot_upload_several(world: dict[str, Any], client: Any) -> None:
    fleet = world["x"]["fleet"]
    before = _counts()
    client.force_login(world["users"]["viewer"])
    assert client.post(f"/fleets/{fleet.pk}/calibration/", {"kind": "nccl-tests",
                                                            "file": [_part(n) for n in NCCL]}).status_code == 403
    client.force_login(world["other_admin"])
    assert client.post(f"/fleets/{fleet.pk}/calibration/", {"kind": "nccl-tests",
                                                            "file": [_part(n) for n in NCCL]}).status_code == 404
    assert _counts() == before


def test_more_files_than_django_takes_is_a_400_page(world: dict[str, Any], planner: Any) -> None:
    planner.raise_request_exception = False
    before = _counts()
    r = planner.post(f"/fleets/{world['x']['fleet'].pk}/calibration/",
                     {"kind": "nccl-tests", "file": [_part(f"f{i}.txt", b"x\n") for i in range(101)]})
    assert r.status_code == 400
    assert _counts() == before
