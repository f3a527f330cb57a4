"""The engine document a scenario stands for: build it, validate it with the engine, edit paths."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from core.errors import ValidationError
from engine.document.parse import parse_scenario
from engine.document.ranges import get_path, set_path
from engine.errors import ScenarioError
from engine.fabric.sizing import DEFAULT_SERVER_FOR_GPU
from engine.performance.api import RUNNABLE_INPUTS, check_runnable
from engine.schema.types import ScenarioSpec
from planning.models import Fleet, Workload


def document_validate(
    *, document: Mapping[str, Any], catalog: Mapping[str, dict[str, Any]] | None, runnable: bool = True
) -> ScenarioSpec:
    """Check a full engine document with the engine's own rules; 400-style errors name the field.

    Save-time validation is the engine's parser (as :func:`engine.document.validate.validate_scenario`) and its
    layout check (:func:`engine.performance.api.check_runnable`: fixed settings the search would refuse, such as
    an interleaved pipeline on DeepSpeed), so this returns what it parsed — the engine
    :class:`~engine.schema.types.ScenarioSpec`, fabric sized — and a caller that goes on to run the engine in the
    same request hands it that instead of parsing again. ``runnable=False`` parses only: a caller validating many
    documents that share their layout space (a sweep's children) runs :func:`runnable_validate` once per space.
    """
    try:
        if not isinstance(document, Mapping):
            raise ScenarioError("scenario", f"must be an object, got {type(document).__name__}")
        spec = parse_scenario(document, catalog=catalog)
    except ValueError as exc:
        raise _field_error(exc) from None
    if runnable:
        runnable_validate(spec=spec, catalog=catalog)
    return spec


def runnable_validate(*, spec: ScenarioSpec, catalog: Mapping[str, dict[str, Any]] | None) -> None:
    """The layout half of :func:`document_validate` on a parsed scenario (:func:`check_runnable`), 400-style."""
    try:
        check_runnable(spec, catalog)
    except ValueError as exc:
        raise _field_error(exc) from None


def runnable_key(document: Mapping[str, Any]) -> tuple[str, ...]:
    """What :func:`check_runnable` reads of a document (the engine's ``RUNNABLE_INPUTS``: the layout space and the
    GPU's precisions): documents with the same key pass or fail it together."""
    return tuple(json.dumps(get_path(document, tuple(path.split("."))), sort_keys=True, default=str)
                 for path in RUNNABLE_INPUTS)


def _field_error(exc: ValueError) -> ValidationError:
    field = str(getattr(exc, "field", "") or "detail")
    return ValidationError({field: [str(getattr(exc, "message", exc))]})


def fleet_cluster(*, fleet: Fleet, catalog: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The engine ``cluster`` section a fleet stands for (GPU model from its server's catalog item)."""
    cluster: dict[str, Any] = {
        "gpus": fleet.gpus,
        "gpus_per_node": fleet.gpus_per_node,
        "nics_per_node": fleet.nics_per_node,
        "nic_gbps": fleet.nic_gbps,
        "fabric": fleet.fabric,
        "topology": fleet.topology,
        "oversubscription": fleet.oversubscription,
    }
    server = (catalog or {}).get(fleet.server_model)
    if server and server.get("specs", {}).get("gpu"):
        cluster["gpu"] = server["specs"]["gpu"]
    return cluster


def build_document(
    *,
    workload: Workload,
    fleet: Fleet | None,
    cluster: Mapping[str, Any] | None,
    costs: Mapping[str, Any] | None,
    uncertainty: Mapping[str, Any] | None,
    catalog: Mapping[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": copy.deepcopy(workload.model or {}),
        "training": copy.deepcopy(workload.training or {}),
        "parallelism": copy.deepcopy(workload.parallelism if workload.parallelism not in (None, {}) else "auto"),
        "cluster": {**(fleet_cluster(fleet=fleet, catalog=catalog) if fleet else {}), **(cluster or {})},
    }
    if costs:
        doc["costs"] = copy.deepcopy(dict(costs))
    if uncertainty:
        doc["uncertainty"] = copy.deepcopy(dict(uncertainty))
    return doc


def set_dotted(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, creating intermediate objects (the engine's ``set_path`` on a dotted path)."""
    set_path(doc, tuple(path.split(".")), value)


def gpu_server_item(
    *, gpu: str, catalog: Mapping[str, Mapping[str, Any]], server: str | None = None
) -> dict[str, Any] | None:
    """The catalog server item the cost model prices ``gpu`` with (``costs.server`` if given, else the
    engine's default server for that GPU, else the first server holding it); None when there is none."""
    key = server or DEFAULT_SERVER_FOR_GPU.get(gpu)
    if key is None:
        matches = sorted(k for k, v in catalog.items()
                         if v.get("kind") == "server" and (v.get("specs") or {}).get("gpu") == gpu)
        key = matches[0] if matches else None
    item = catalog.get(key) if key else None
    return dict(item) if item and item.get("kind") == "server" else None
