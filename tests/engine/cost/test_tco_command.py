"""``manage.py tco`` through call_command (no database)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.engine.cost.test_tco import reference


def write(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(path)


def run(*args: str) -> str:
    out = StringIO()
    call_command("tco", *args, stdout=out)
    return out.getvalue()


def test_json_output(tmp_path: Path) -> None:
    data = json.loads(run(write(tmp_path, reference())))
    assert data["fabric"]["switches"]["total"] == 1280
    assert 0.09 <= data["tco"]["network_share_of_tco"] <= 0.13
    assert "monte_carlo" not in data and "sensitivity" not in data


def test_monte_carlo_and_sensitivity(tmp_path: Path) -> None:
    doc = reference()
    doc["costs"]["usd_per_kwh"] = {"low": 0.05, "likely": 0.08, "high": 0.19}
    data = json.loads(run(write(tmp_path, doc), "--monte-carlo", "500", "--sensitivity", "--seed", "4"))
    assert data["monte_carlo"]["samples"] == 500 and data["monte_carlo"]["seed"] == 4
    assert data["sensitivity"][0]["swing_usd"] >= data["sensitivity"][-1]["swing_usd"]


def test_table_output(tmp_path: Path) -> None:
    text = run(write(tmp_path, reference()), "--format", "table", "--monte-carlo", "100")
    assert "tco.usd_per_gpu_hour" in text and "fabric.switches.total" in text and "monte_carlo.run_cost_usd" in text


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d["costs"].update(prices={"QM9700": -1}), "costs.prices.QM9700"),
    (lambda d: d["cluster"].update(switch="NOPE"), "cluster.switch"),
    (lambda d: d["cluster"].update(tiers=2), "cluster.gpus"),
    (lambda d: d["costs"].update(pue={"low": 2, "likely": 1.5, "high": 1.2}), "costs.pue"),
])
def test_bad_input_is_one_line_naming_the_field(tmp_path: Path, mutate: Any, field: str) -> None:
    doc = reference()
    mutate(doc)
    with pytest.raises(CommandError) as exc:
        run(write(tmp_path, doc))
    msg = str(exc.value)
    assert msg.startswith(field) and "\n" not in msg


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        run(str(tmp_path / "missing.json"))
    with pytest.raises(CommandError, match="invalid JSON"):
        run(write(tmp_path, "{nope"))
