"""Issue #22 acceptance through the CLI: NVFP4 on B300 and a 64-GPU job on GB300 NVL72 (less than one rack), from
a scenario JSON file to ``manage.py predict`` and ``manage.py tco``; NVFP4 on a GPU without it is one line naming
training.precision. The scenario builders here are shared with the API and portal acceptance tests."""

from __future__ import annotations

import copy
import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.engine.performance.test_rack_scale import LLAMA_70B


def b300_nvfp4(**cluster: Any) -> dict[str, Any]:
    """Llama-3-70B on 64 B300 (eight HGX servers) in NVFP4, TP 8 within a server."""
    return {
        "model": copy.deepcopy(LLAMA_70B),
        "training": {"global_batch": 512, "micro_batch": 1, "tokens": 1.5e13, "precision": "nvfp4",
                     "recompute": "selective", "zero": 1},
        "parallelism": {"tp": 8, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": True},
        "cluster": {"gpu": "B300", "gpus": 64, **cluster},
    }


def gb300_64(**cluster: Any) -> dict[str, Any]:
    """Llama-3-70B on 64 GB300: 64 of one NVL72 rack's 72 GPUs, in fp8."""
    doc = b300_nvfp4(gpu="GB300", nic_gbps=800, **cluster)
    doc["training"]["precision"] = "fp8"
    return doc


CASES = {"b300-nvfp4": b300_nvfp4, "gb300-64": gb300_64}


def _file(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _run(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("case", CASES)
def test_predict_fits_with_a_sensible_step_time_and_mfu(tmp_path: Path, case: str) -> None:
    doc = CASES[case]()
    data = json.loads(_run("predict", _file(tmp_path, doc)))
    assert data["fits"] is True
    assert data["step_time_s"] > 0 and 0.05 < data["mfu"] < 0.9
    assert data["parallelism"]["tp"] == 8 and data["parallelism"]["dp"] * 8 == doc["cluster"]["gpus"]
    lo, hi = data["intervals"]["step_time_s"]
    assert lo < data["step_time_s"] < hi
    table = _run("predict", _file(tmp_path, doc), "--format", "table")
    rows = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    assert rows["fits"].split()[1] == "True"
    for key in ("step_time_s", "mfu"):
        assert float(rows[key].split()[1]) > 0 and "(80%:" in rows[key], rows[key]


def test_nvfp4_is_faster_than_bf16_on_the_same_b300_layout(tmp_path: Path) -> None:
    """The 4-bit GEMMs reach the CLI: the same job in bf16 takes longer per step."""
    nvfp4 = json.loads(_run("predict", _file(tmp_path, b300_nvfp4())))
    doc = b300_nvfp4()
    doc["training"]["precision"] = "bf16"
    bf16 = json.loads(_run("predict", _file(tmp_path, doc)))
    assert bf16["fits"] is True and nvfp4["step_time_s"] < bf16["step_time_s"]


@pytest.mark.parametrize(("case", "server"), [("b300-nvfp4", "HGX-B300"), ("gb300-64", "GB300-NVL72")])
def test_tco_prices_the_job(tmp_path: Path, case: str, server: str) -> None:
    data = json.loads(_run("tco", _file(tmp_path, CASES[case]())))
    assert data["performance"]["fits"] is True and 0.05 < data["performance"]["mfu"] < 0.9
    assert data["tco"]["server_model"] == server
    assert data["tco"]["capex_usd"] > 0 and data["tco"]["run_cost_usd"] > 0
    table = _run("tco", _file(tmp_path, CASES[case]()), "--format", "table")
    assert "tco.run_cost_usd" in table and "performance.time_to_train_days" in table


def test_gb300_64_buys_one_rack(tmp_path: Path) -> None:
    """64 GPUs are less than one NVL72 rack: one rack is priced, and the whole job is one NVLink domain."""
    data = json.loads(_run("tco", _file(tmp_path, gb300_64())))
    rack = next(li for li in data["tco"]["line_items"] if "GB300-NVL72" in li["item"])
    assert rack["quantity"] == 1
    assert data["fabric"]["nvlink_domain_gpus"] == 64


@pytest.mark.parametrize("command", ["predict", "tco"])
def test_nvfp4_on_h100_is_one_line_naming_training_precision(tmp_path: Path, command: str) -> None:
    doc = b300_nvfp4(gpu="H100-SXM")
    with pytest.raises(CommandError) as info:
        _run(command, _file(tmp_path, doc))
    message = str(info.value)
    assert message.startswith("training.precision") and "\n" not in message, message


def test_nvfp4_on_h100_exits_non_zero_from_the_shell(tmp_path: Path) -> None:
    """Through manage.py itself: a non-zero exit and the field's name on stderr, no traceback."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, str(root / "manage.py"), "predict", _file(tmp_path, b300_nvfp4(gpu="H100-SXM"))],
                          capture_output=True, text=True, cwd=root, timeout=120, check=False)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "training.precision" in lines[0], proc.stderr
