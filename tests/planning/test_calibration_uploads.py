"""Calibration files in the planning layer (issue #23): what the upload request checks at once, what the import
stores (compact: a step log's aggregates, not its rows), and the migration that brings older files in line."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from django.apps import apps

from core.errors import ValidationError
from tests.paths import ROOT

pytestmark = pytest.mark.django_db

EXAMPLES = ROOT / "examples" / "calibration"


def _nccl() -> str:
    manifest = json.loads((EXAMPLES / "manifest.json").read_text(encoding="utf-8"))
    entry = next(e for e in manifest["nccl"] if e["ranks"] == 32 and e["collective"] == "all_reduce")
    return (EXAMPLES / entry["file"]).read_text(encoding="utf-8")


def test_storing_checks_only_what_is_cheap_and_leaves_the_parse_to_the_job(world) -> None:
    from planning.models import CalibrationUpload
    from planning.services import calibration

    fleet, user = world["x"]["fleet"], world["users"]["planner"]
    with pytest.raises(ValidationError, match="must be one of"):
        calibration.calibration_upload_store(fleet=fleet, user=user, kind="pcap", content="x")
    with pytest.raises(ValidationError) as err:
        calibration.calibration_upload_store(fleet=fleet, user=user, kind="step-log", content="1,2.0\n")
    assert "scenario" in err.value.as_dict()
    with pytest.raises(ValidationError) as err:
        calibration.calibration_upload_store(fleet=fleet, user=user, kind="nccl-tests", content=b"\xff\xfe")
    assert "UTF-8" in err.value.message
    stored = calibration.calibration_upload_store(fleet=fleet, user=user, kind="nccl-tests", content="not nccl\n",
                                                  collective="all_reduce")
    assert stored.status == CalibrationUpload.Status.PENDING and stored.parsed == {} and stored.summary == {}
    assert stored.options == {"collective": "all_reduce"}
    with pytest.raises(ValidationError) as err:
        calibration.calibration_upload_parse(upload=stored)
    assert "line 1" in err.value.as_dict()["file"][0]


def test_step_log_is_stored_without_its_rows() -> None:
    from planning.services.calibration import MAX_WARMUP_LISTED, compact_parsed, upload_summary

    parsed = {"format": "csv", "steps": [{"step": i, "step_time_s": 1.0} for i in range(5000)],
              "warmup_excluded": list(range(MAX_WARMUP_LISTED + 5)), "step_time_s": 1.0, "steps_used": 3995,
              "notes": ["n"], "step_time_sem_rel": 0.01, "tflops_per_gpu": None}
    out = compact_parsed("step-log", parsed)
    assert "steps" not in out and out["steps_logged"] == 5000
    assert len(out["warmup_excluded"]) == MAX_WARMUP_LISTED and out["warmup_excluded_count"] == MAX_WARMUP_LISTED + 5
    assert upload_summary("step-log", out)["steps_used"] == 3995
    nccl = {"collective": "all_reduce", "rows": [{"size_bytes": 8}] * 3, "ranks": 8}
    assert compact_parsed("nccl-tests", nccl) == nccl  # a fit reads every nccl-tests row
    assert upload_summary("nccl-tests", nccl)["rows"] == 3


def test_the_in_process_create_is_all_or_nothing(world) -> None:
    from planning.models import CalibrationUpload
    from planning.services import calibration

    fleet, user = world["x"]["fleet"], world["users"]["planner"]
    with pytest.raises(ValidationError):
        calibration.calibration_upload_create(fleet=fleet, user=user, kind="nccl-tests", content="hello\n")
    assert not CalibrationUpload.objects.filter(fleet=fleet).exists()
    upload = calibration.calibration_upload_create(fleet=fleet, user=user, kind="nccl-tests", content=_nccl())
    assert upload.status == "ready" and upload.summary["ranks"] == 32 and upload.parsed["rows"]


def test_migration_marks_older_files_ready_with_summaries_and_drops_step_rows(world) -> None:
    from planning.models import CalibrationProfile, CalibrationUpload
    from planning.services import calibration

    fleet, user = world["x"]["fleet"], world["users"]["planner"]
    nccl = calibration.calibration_upload_create(fleet=fleet, user=user, kind="nccl-tests", content=_nccl())
    profile = calibration.calibration_fit(fleet=fleet, user=user)
    # as the rows were before the migration: parsed at upload time with every step, no status or summaries
    legacy = CalibrationUpload.objects.create(
        team=fleet.team, fleet=fleet, kind="step-log", size_bytes=10, sha256="0" * 64, content="...",
        parsed={"format": "csv", "steps": [{"step": 1, "step_time_s": 2.0}] * 10, "step_time_s": 2.0,
                "steps_used": 10, "notes": []})
    CalibrationUpload.objects.filter(pk__in=[nccl.pk, legacy.pk]).update(status="pending", summary={})
    CalibrationProfile.objects.filter(pk=profile.pk).update(summary={})
    migration = importlib.import_module("planning.migrations.0008_calibration_upload_jobs")
    migration.backfill(apps, None)
    nccl.refresh_from_db()
    legacy.refresh_from_db()
    profile.refresh_from_db()
    assert nccl.status == legacy.status == "ready"
    assert nccl.summary == calibration.upload_summary("nccl-tests", nccl.parsed)
    assert "steps" not in legacy.parsed and legacy.parsed["steps_logged"] == 10 and legacy.summary["step_time_s"] == 2.0
    expected: dict[str, Any] = calibration.profile_summary(profile=profile)
    assert profile.summary == expected and profile.summary["collectives"]
