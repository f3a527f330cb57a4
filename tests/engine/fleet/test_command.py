"""``manage.py simulate_fleet`` (no database): JSON and table output, progress, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.engine.fleet.test_search import doc
from tests.paths import ROOT

DEMO = ROOT / "engine" / "fleet" / "examples" / "demo_plan.json"


def write(tmp_path: Path, d: Any) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d) if not isinstance(d, str) else d)
    return str(path)


def run(*args: str) -> str:
    out = StringIO()
    call_command("simulate_fleet", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_json_output_has_bands_and_the_purchase(tmp_path: Path) -> None:
    data = json.loads(run(write(tmp_path, doc()), "--replications", "2", "--search"))
    assert data["summary"]["replications"] == 2
    assert data["summary"]["deadlines_missed"]["p50"] == 1.0
    assert data["purchase"]["recommendation"]["option"] == "H100 now 64 GPUs day 0"
    assert data["purchase"]["replications"] == 2 and "2 replications" in data["purchase"]["headline"]
    assert len(data["replications"]) == 2 and "timeline" in data["first"]


def test_the_purchase_search_is_a_separate_flagged_step(tmp_path: Path) -> None:
    """Issue #24: the README's example silently ran every purchase option (8 options x 10 replications)."""
    path = write(tmp_path, doc())
    data = json.loads(run(path, "--replications", "1"))
    assert "purchase" not in data and data["purchase_options"] == 4  # buy nothing + 3 candidates, not simulated
    text = run(path, "--replications", "1", "--format", "table")
    assert "purchase search: not run (4 options; add --search" in text
    text = run(path, "--replications", "1", "--format", "table", "--search")
    assert "recommended purchase (meets every deadline at P90 over 1 replication, the same seeds" in text
    no_candidates = {**doc(), "candidates": []}
    with pytest.raises(CommandError, match=r"^candidates: is required"):
        run(write(tmp_path, no_candidates), "--replications", "1", "--search")


def test_table_output(tmp_path: Path) -> None:
    text = run(write(tmp_path, doc()), "--format", "table", "--replications", "1", "--no-search")
    assert "utilization (allocated / available)" in text and "first shortfall day" in text
    assert "Q1 (days 0-" in text and "second" in text and "recommended purchase" not in text


@pytest.mark.parametrize(("content", "message"), [
    ("{", "invalid JSON"),
    (json.dumps({"horizon_days": 10, "clusters": [{"name": "x", "gpu": "H100-SXM", "gpus": -1}]}),
     "clusters[0].gpus: "),
    (json.dumps({"horizon_days": 10}), "clusters: is required"),
])
def test_bad_input_is_one_line(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(CommandError) as exc:
        run(write(tmp_path, content))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_bad_replications(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--replications"):
        run(write(tmp_path, doc()), "--replications", "0")


def test_cli_exit_status_and_message_without_a_database(tmp_path: Path) -> None:
    path = write(tmp_path, {"horizon_days": 0, "clusters": []})
    env = {"PATH": "/usr/bin:/bin", "FP_VAR_DIR": str(tmp_path / "var")}
    proc = subprocess.run([sys.executable, str(ROOT / "manage.py"), "simulate_fleet", path], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith("CommandError: horizon_days: must be an integer")


def test_demo_plan_is_valid_and_shows_a_shortfall() -> None:
    from engine.fleet.core import prepare, simulate_prepared
    from engine.fleet.plan import parse_plan

    plan = json.loads(DEMO.read_text())
    p = parse_plan(plan)
    assert p.candidates and p.budget_usd
    r = simulate_prepared(prepare(p), 0)
    assert r["first_shortfall_day"] is not None and r["deadlines_missed"] >= 1
