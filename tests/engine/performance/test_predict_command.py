from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.engine._scenarios import scenario


def run(*args: str) -> str:
    out = StringIO()
    call_command("predict", *args, stdout=out)
    return out.getvalue()


def test_predict_prints_json(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scenario()))
    data = json.loads(run(str(f)))
    assert data["fits"] is True and data["step_time_s"] > 0
    assert set(data["breakdown_s"]) >= {"compute", "pp_bubble"}


def test_predict_search_and_table(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scenario(training={"micro_batch": "auto", "recompute": "auto"})))
    data = json.loads(run(str(f), "--search", "--top-k", "2"))
    assert len(data["alternatives"]) == 2 and data["candidates_evaluated"] >= data["candidates_feasible"]
    table = run(str(f), "--search", "--format", "table")
    assert "step_time_s" in table and "alt 1:" in table


def test_invalid_scenario_names_field(tmp_path: Path) -> None:
    doc = scenario()
    doc["parallelism"]["tp"] = 3
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CommandError) as info:
        run(str(f))
    msg = str(info.value)
    assert msg.startswith("parallelism.tp:") and "\n" not in msg
    doc = scenario(cluster={"gpu": "Z100"})
    f.write_text(json.dumps(doc))
    with pytest.raises(CommandError, match=r"^cluster\.gpu: unknown gpu"):
        run(str(f))


def test_unreadable_or_bad_json(tmp_path: Path) -> None:
    with pytest.raises(CommandError):
        run(str(tmp_path / "missing.json"))
    f = tmp_path / "x.json"
    f.write_text("{not json")
    with pytest.raises(CommandError, match="invalid JSON"):
        run(str(f))


def test_validation_report_writes_markdown(tmp_path: Path) -> None:
    out = StringIO()
    target = tmp_path / "validation.md"
    bands = tmp_path / "error_bands.json"
    summary = tmp_path / "accuracy_summary.json"
    call_command("validation_report", "--output", str(target), "--bands", str(bands),
                 "--plot", str(tmp_path / "validation_scaling.png"), "--summary", str(summary), stdout=out)
    assert "MAPE" in out.getvalue()
    assert "| llama3-405b-8192-cp1 |" in target.read_text()
    assert json.loads(bands.read_text())["bands"]
    assert "llama3-405b-8192-cp1" in {r["run"] for r in json.loads(summary.read_text())["rows"]}


def test_awkward_size_note_reaches_the_cli(tmp_path: Path) -> None:
    """2,016 GPUs factor badly (tests/simulations/services/test_advice_sizing_service.py): the CLI says so, in JSON
    and in the table, as the API and the portal do; 2,304 factors well and gets no note."""
    from tests.engine.performance.test_advice_sizing import doc

    f = tmp_path / "awkward.json"
    f.write_text(json.dumps(doc(2016)))
    notes = json.loads(run(str(f)))["notes"]
    assert any(n.startswith("Awkward size: 2,016 GPUs") for n in notes)
    assert "note: Awkward size: 2,016 GPUs" in run(str(f), "--format", "table")
    f.write_text(json.dumps(doc(2304)))
    assert not any(n.startswith("Awkward size") for n in json.loads(run(str(f)))["notes"])
