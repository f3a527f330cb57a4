"""The uploaded-manifest reader (issue #24, ``simulations/services/calibration_manifest.py``).

* the shipped manifests read as the engine's own reader (``engine.calibration.manifest.load_manifest``, what
  ``manage.py calibrate`` uses) reads them: the same files, kinds, labels, collectives and run scenarios;
* JSON, YAML and CSV forms of one manifest give the same entries;
* any bytes at all, named .json, .yaml, .csv or nothing, are either entries or a ``ValidationError`` naming the
  manifest — never another exception (Hypothesis; ``make fuzz`` draws more).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import ValidationError
from engine.calibration.manifest import load_manifest
from simulations.services.calibration_manifest import read_manifest
from tests.paths import DATA, ROOT

MANIFESTS = [ROOT / "examples" / "calibration" / "manifest.json", DATA / "calibration" / "manifest.json"]


@pytest.mark.parametrize("path", MANIFESTS, ids=["examples", "tests-data"])
def test_shipped_manifests_read_as_the_engine_reads_them(path: Any) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    entries = read_manifest(name=path.name, raw=path.read_bytes())
    _, nccl, runs = load_manifest(path)
    nccl_entries = [e for e in entries if e.kind == "nccl-tests"]
    run_entries = [e for e in entries if e.kind == "step-log"]
    assert len(entries) == len(nccl) + len(runs) and nccl and runs
    assert [e.file for e in nccl_entries] == [n["label"] for n in nccl]  # the engine labels a file by its name
    assert [e.collective for e in nccl_entries] == [item.get("collective") for item in doc["nccl"]]
    assert [e.label for e in run_entries] == [r["id"] for r in runs]
    assert [e.scenario for e in run_entries] == [r["scenario"] for r in runs]
    for e, item in zip(nccl_entries, doc["nccl"], strict=True):
        assert e.options == {k: item[k] for k in ("ranks", "nodes") if k in item}


def _as_yaml(doc: dict[str, Any]) -> bytes:
    return yaml.safe_dump(doc).encode()


def _as_csv(doc: dict[str, Any]) -> bytes:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["file", "kind", "label", "collective", "ranks", "scenario", "warmup_steps"])
    for n in doc["nccl"]:
        w.writerow([n["file"], "nccl-tests", "", n.get("collective", ""), n.get("ranks", ""), "", ""])
    for r in doc["runs"]:
        w.writerow([r["file"], "step-log", r["id"], "", "", json.dumps(r["scenario"]),
                    (r.get("parse") or {}).get("warmup_steps", "")])
    return out.getvalue().encode()


@pytest.mark.parametrize("name,render", [("m.yaml", _as_yaml), ("m.csv", _as_csv)])
def test_yaml_and_csv_forms_give_the_same_entries(name: str, render: Any) -> None:
    path = MANIFESTS[0]
    doc = json.loads(path.read_text(encoding="utf-8"))
    want = read_manifest(name="manifest.json", raw=path.read_bytes())
    got = read_manifest(name=name, raw=render(doc))
    assert [(e.file, e.kind, e.label, e.collective, e.scenario, e.options) for e in got] == \
           [(e.file, e.kind, e.label, e.collective, e.scenario, e.options) for e in want]


BYTES = st.binary(max_size=400)
SHAPED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["nccl", "runs", "telemetry", "file", "scenario", "ranks", "nodes", "parse", "collective",
                         "id", "gpus", "warmup_steps", "tokens_per_step", "fmt", "format", "x"]), inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(["m.json", "m.yaml", "m.csv", "manifest"]),
       raw=BYTES | SHAPED.map(lambda v: json.dumps(v).encode()) | SHAPED.map(lambda v: yaml.safe_dump(v).encode())
       | st.text(alphabet="file,kind\nnccl-tests,step-log\"{}:[]0123 a", max_size=200).map(str.encode))
def test_any_manifest_is_entries_or_a_named_400(name: str, raw: bytes) -> None:
    try:
        entries = read_manifest(name=name, raw=raw)
    except ValidationError as exc:
        assert all(k.startswith("manifest") for k in exc.as_dict()), exc.as_dict()
        return
    assert entries and all(e.file and e.kind in ("nccl-tests", "step-log", "telemetry") for e in entries)
