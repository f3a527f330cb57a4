"""``manage.py simulate_fabric``: the fabric study on the command line (issue #13)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.engine._scenarios import LLAMA_7B


def _file(tmp_path: Path, **cluster: object) -> str:
    doc = {"model": LLAMA_7B, "training": {"global_batch": 1024, "micro_batch": 1, "tokens": 1e12},
           "parallelism": {"tp": 8, "pp": 1}, "cluster": {"gpu": "H100-SXM", "gpus": 1024, **cluster}}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(doc))
    return str(f)


def run(*args: str) -> str:
    out = StringIO()
    call_command("simulate_fabric", *args, stdout=out)
    return out.getvalue()


def test_default_compares_routings_and_prints_the_quote(tmp_path: Path) -> None:
    text = run(_file(tmp_path, fabric="roce"), "--seeds", "3")
    assert "single-QP ECMP" in text and "8 QPs" in text and "adaptive" in text
    assert "of line rate to this 1,024-GPU ring all-reduce" in text


def test_one_routing_as_json(tmp_path: Path) -> None:
    data = json.loads(run(_file(tmp_path), "--routing", "ecmp", "--qps", "2", "--seeds", "2", "--format", "json"))
    assert data["inputs"]["routing"] == "ecmp" and data["inputs"]["qps"] == 2
    assert 0 < data["efficiency"]["p50"] <= 1


@pytest.mark.parametrize(("args", "field"), [(["--seeds", "0"], "seeds"), (["--traffic", "magic"], "traffic"),
                                              (["--ranks", "12"], "ranks")])
def test_bad_input_is_one_line_naming_the_field(tmp_path: Path, args: list[str], field: str) -> None:
    with pytest.raises(CommandError) as exc:
        run(_file(tmp_path), *args)
    assert str(exc.value).startswith(f"{field}:") and "\n" not in str(exc.value)
