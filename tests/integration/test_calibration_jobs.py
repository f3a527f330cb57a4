"""Calibration uploads and fits as jobs on a real worker (issue #23): PostgreSQL, Redis, ``celery worker``.

The upload answers 202 at once; the worker reads the file (ready, with its summary) or refuses it naming the line;
a fit answers 202 and the worker writes the profile version; a retry with the same Idempotency-Key answers the same
version.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.integration._waiting import wait_for
from tests.paths import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

EXAMPLES = ROOT / "examples" / "calibration"
MANIFEST = json.loads((EXAMPLES / "manifest.json").read_text(encoding="utf-8"))




def test_uploads_and_fit_run_on_the_worker(make_user, celery_worker_factory, api_client_for, purge_broker) -> None:
    from planning import services as planning
    from planning.models import CalibrationProfile

    planning.catalog_load_default()
    user = make_user("planner")
    fleet = planning.fleet_create(team=user.test_team, user=user, name="A100 pod", server_model="HGX-A100-80GB",
                                  server_count=8, nic_gbps=200, fabric="infiniband", topology="fat-tree")
    worker = celery_worker_factory(queues="default,simulations")
    client = api_client_for(user)
    nccl = next(e for e in MANIFEST["nccl"] if e["ranks"] == 32 and e["collective"] == "all_reduce")
    run = next(r for r in MANIFEST["runs"] if r["id"] == "llama7b-32gpu-bf16")
    scenario = {k: copy.deepcopy(run["scenario"][k]) for k in ("model", "training", "parallelism")}
    scenario["cluster"] = {"gpus": run["scenario"]["cluster"]["gpus"]}
    bodies = [
        {"kind": "nccl-tests", "content": (EXAMPLES / nccl["file"]).read_text(encoding="utf-8")},
        {"kind": "step-log", "content": (EXAMPLES / run["file"]).read_text(encoding="utf-8"), "scenario": scenario},
        {"kind": "nccl-tests", "content": "# nccl-tests\nnot a row\n"},
    ]
    ids = []
    for body in bodies:
        r = client.post("/api/v1/calibration-files/", {"fleet": fleet.pk, **body}, format="json")
        assert r.status_code == 202, r.content
        ids.append(r.json()["id"])

    def file(pk: int) -> dict[str, Any]:
        return client.get(f"/api/v1/calibration-files/{pk}/").json()

    wait_for(lambda: all(file(pk)["status"] != "pending" for pk in ids), 90, "the imports")
    good, log, bad = (file(pk) for pk in ids)
    assert good["status"] == "ready" and good["summary"]["ranks"] == 32, (good, worker.output()[-2000:])
    assert log["status"] == "ready" and log["summary"]["step_time_s"] > 0
    assert bad["status"] == "failed" and "line 2" in bad["error"] and bad["job"]["status"] == "failed"

    key = {"HTTP_IDEMPOTENCY_KEY": "integration-fit-1"}
    r = client.post("/api/v1/calibration-profiles/", {"fleet": fleet.pk, "uploads": ids[:2]}, format="json", **key)
    assert r.status_code == 202, r.content
    job = wait_for(lambda: (lambda j: j if j["status"] in ("succeeded", "failed") else None)(client.get(r.json()["url"]).json()),
                90, "the fit")
    assert job["status"] == "succeeded", (job, worker.output()[-2000:])
    again = client.post("/api/v1/calibration-profiles/", {"fleet": fleet.pk, "uploads": ids[:2]}, format="json", **key)
    assert again.status_code == 200 and again.json()["version"] == job["result"]["version"] == 1
    assert CalibrationProfile.objects.filter(fleet=fleet).count() == 1
    assert job["attempts"] == 1
