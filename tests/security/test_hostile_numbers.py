"""Huge, non-integral and mistyped numbers in every numeric field: a fast 400 naming the field, nothing stored.

The fields are the bounds table (engine/schema/bounds.py), so a field added there is covered here. Each is
sent through the preview endpoint (a full document), and the main ones through sweep axes and run parameters,
where the probe of issue #11 found values accepted with 202 that later failed or hung in the worker.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from engine.schema.bounds import BOUNDS
from tests.security.seed import World, document, seed_world
from tests.security.test_hostile_input import _fingerprint

pytestmark = pytest.mark.django_db

MOE = {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024}
MLA = {"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
# Raw JSON text for each hostile value (1e400 is valid JSON that Python reads as infinity).
HUGE = ["1e308", "-1e308", "1e400", "1" + "0" * 400]
NON_INTEGRAL = ["2.5", "-0.5"]
WRONG_TYPE = ["true", '"1024"', "[]", "{}"]
DOC_SECTIONS = ("model.", "training.", "parallelism.", "cluster.", "costs.")


@pytest.fixture
def world() -> World:
    return seed_world(execute=False)


@pytest.fixture
def admin(world: World) -> APIClient:
    c = APIClient()
    c.force_login(world.home.users["admin"])
    c.raise_request_exception = False
    return c


def _document_with(field: str, raw: str) -> str:
    """A valid document with ``field`` set to the raw JSON text ``raw`` (spliced, so 10**400 stays exact)."""
    doc = document()
    if field.startswith("model.moe."):
        doc["model"]["moe"] = dict(MOE)
    if field.startswith("model.mla."):  # multi-head latent attention: every head has its own K and V
        doc["model"]["mla"] = dict(MLA)
        doc["model"].pop("kv_heads", None)
        doc["model"].pop("head_dim", None)
    if field == "costs.prices.*":
        field = "costs.prices.QM9700"
    node: dict[str, Any] = doc
    parts = field.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = "__HOSTILE__"
    return json.dumps({"document": doc}).replace('"__HOSTILE__"', raw)


def _doc_fields() -> list[str]:
    return sorted(f for f in BOUNDS if f.startswith(DOC_SECTIONS))


def _errors(resp: Any) -> dict[str, Any]:
    assert resp["Content-Type"].startswith("application/json"), (resp.status_code, resp.content[:200])
    return dict(resp.json()["errors"])


def test_every_numeric_document_field_refuses_hostile_numbers_in_preview(world, admin, monkeypatch) -> None:
    import importlib

    preview_module = importlib.import_module("simulations.services.preview")  # the package re-exports the function
    engine_calls: list[str] = []
    for name in ("predict", "tco"):  # the engine work a preview does once the document is read
        real = getattr(preview_module, name)
        monkeypatch.setattr(preview_module, name,
                            lambda *a, _real=real, _name=name, **k: engine_calls.append(_name) or _real(*a, **k))
    failures = []
    for field in _doc_fields():
        kind = BOUNDS[field].kind
        for raw in HUGE + WRONG_TYPE + (NON_INTEGRAL if kind == "int" else []):
            resp = admin.post("/api/v1/preview/", _document_with(field, raw), content_type="application/json")
            if resp.status_code != 400:
                failures.append(f"{field}={raw[:12]}: {resp.status_code} {resp.content[:160]!r}")
                continue
            errors = _errors(resp)
            name = field.replace("*", "QM9700")
            if not any(key == name or key.startswith(name + ".") or key == f"document.{name}" for key in errors):
                failures.append(f"{field}={raw[:12]}: the error does not name the field: {errors}")
    assert not failures, f"{len(failures)} hostile values not refused as a 400 naming the field:\n" + "\n".join(failures[:60])
    assert engine_calls == [], "a hostile number is refused while the document is read, before any engine work " \
        "(the time a refusal takes: benchmarks/bench_refusals.py)"
    resp = admin.post("/api/v1/preview/", {"document": document()}, format="json")
    assert resp.status_code == 200 and engine_calls == ["predict", "tco"], "the counter sees a preview's work"


def test_valid_document_previews(world, admin) -> None:
    resp = admin.post("/api/v1/preview/", {"document": document()}, format="json")
    assert resp.status_code == 200, resp.content[:300]


@pytest.mark.parametrize("param", ["monte_carlo", "seed", "top_k"])
def test_run_params_are_strict(world, admin, param) -> None:
    from simulations.models import SimulationRun

    kind = "search" if param == "top_k" else "tco"
    url = f"/api/v1/scenarios/{world.home.scenario.pk}/run/"
    runs = SimulationRun.objects.count()
    for raw in [*HUGE, *NON_INTEGRAL, *WRONG_TYPE, "-1", "null"]:
        body = f'{{"kind": "{kind}", "params": {{"{param}": {raw}}}}}'
        resp = admin.post(url, body, content_type="application/json")
        assert resp.status_code == 400, (param, raw[:12], resp.status_code, resp.content[:200])
        assert f"params.{param}" in _errors(resp), (raw[:12], resp.content[:300])
    assert SimulationRun.objects.count() == runs


def test_run_flags_are_strict_booleans(world, admin) -> None:
    from simulations.models import SimulationRun

    url = f"/api/v1/scenarios/{world.home.scenario.pk}/run/"
    runs = SimulationRun.objects.count()
    for body in ({"kind": "tco", "params": {"sensitivity": "yes"}}, {"kind": "tco", "params": {"sensitivity": 1}},
                 {"kind": "tco", "force": "true"}, {"kind": "tco", "force": 1}):
        resp = admin.post(url, body, format="json")
        assert resp.status_code == 400, (body, resp.status_code, resp.content[:200])
    assert SimulationRun.objects.count() == runs


SWEEP_FIELDS = ["cluster.gpus", "cluster.nic_gbps", "training.global_batch", "model.layers", "costs.usd_per_kwh"]
BAD_AXIS_VALUES = ['"lots"', "null", "[]", "{}", "0", "-8", "1e308", "1e400", "2.5", "[[[[[[[[1]]]]]]]]",
                   '{"low": 1, "high": 2}', "true"]


@pytest.mark.parametrize("field", SWEEP_FIELDS)
def test_every_sweep_axis_value_is_validated_before_anything_is_created(world, admin, field) -> None:
    before = _fingerprint()
    url = f"/api/v1/scenarios/{world.home.scenario.pk}/sweep/"
    for raw in BAD_AXIS_VALUES:
        if field == "costs.usd_per_kwh" and raw in ("0",):
            continue  # free electricity is a legal value
        if BOUNDS[field].kind == "float" and raw == "2.5":
            continue  # a legal value of a real-valued field
        body = f'{{"kind": "predict", "axes": {{"{field}": [{raw}]}}}}'
        resp = admin.post(url, body, content_type="application/json")
        assert resp.status_code == 400, (field, raw, resp.status_code, resp.content[:200])
        assert any(k.startswith(f"axes.{field}") for k in _errors(resp)), (raw, resp.content[:300])
    # One bad value among good ones still refuses the whole sweep.
    resp = admin.post(url, {"kind": "predict", "axes": {"cluster.gpus": [32, 64, 1e308]}}, format="json")
    assert resp.status_code == 400 and "axes.cluster.gpus" in json.dumps(_errors(resp))
    assert _fingerprint() == before


def test_sweep_axis_combinations_are_validated_as_documents(world, admin) -> None:
    """Each value alone is in bounds, but a combination is not a valid scenario: refused before creation."""
    before = _fingerprint()
    url = f"/api/v1/scenarios/{world.home.scenario.pk}/sweep/"
    resp = admin.post(url, {"kind": "predict", "axes": {"cluster.gpus": [32, 36]}}, format="json")  # 36 % 8 != 0
    assert resp.status_code == 400, resp.content[:300]
    assert "36" in json.dumps(_errors(resp))
    assert _fingerprint() == before


def test_workload_sections_are_validated(world, admin) -> None:
    before = _fingerprint()
    doc = document()
    for body in ({"name": "w", "model": {}, "training": doc["training"]},
                 {"name": "w", "model": {**doc["model"], "layers": 1e308}, "training": doc["training"]},
                 {"name": "w", "model": {**doc["model"], "hidden": "2304"}, "training": doc["training"]},
                 {"name": "w", "model": doc["model"], "training": {**doc["training"], "global_batch": 2.5}}):
        resp = admin.post("/api/v1/workloads/", body, format="json")
        assert resp.status_code == 400, (body, resp.status_code, resp.content[:300])
        assert any(k.startswith(("model", "training")) for k in _errors(resp)), resp.content[:300]
    assert _fingerprint() == before


def test_sweep_values_keep_their_type(world, admin) -> None:
    """A valid sweep still works: values are stored as given and every child run is valid."""
    from simulations.models import SimulationRun

    url = f"/api/v1/scenarios/{world.home.scenario.pk}/sweep/"
    resp = admin.post(url, {"kind": "predict", "axes": {"cluster.nic_gbps": [200, 400]}}, format="json")
    assert resp.status_code == 202, resp.content[:300]
    runs = SimulationRun.objects.filter(sweep_id=resp.json()["id"])
    assert sorted(r.input_snapshot["document"]["cluster"]["nic_gbps"] for r in runs) == [200, 400]


def test_every_request_of_the_soak_hostile_stream_is_refused(world, admin) -> None:
    """The soak's hostile stream, one request of each class, in-process: each a JSON 4xx, nothing stored."""
    from tests.security.soak import hostile_requests

    before = _fingerprint()
    failures = []
    for req in hostile_requests(world.home.scenario.pk):
        body = req["content"].encode("latin-1")
        resp = admin.generic(req["method"], req["path"], body, content_type=req["content_type"])
        if not 400 <= resp.status_code < 500 or not resp["Content-Type"].startswith("application/json"):
            failures.append(f"{req['method']} {req['path']} {body[:90]!r}: {resp.status_code} {resp.content[:160]!r}")
    assert not failures, f"{len(failures)} hostile requests not refused:\n" + "\n".join(failures[:30])
    assert _fingerprint() == before
