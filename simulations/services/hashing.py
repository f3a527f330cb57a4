"""Canonical JSON, plain-JSON cleaning and the input hash that makes runs idempotent."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from simulations.engine import ENGINE_VERSION


def _json_default(value: Any) -> Any:
    # numpy scalars/arrays and dataclasses from the engine
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def jsonable(value: Any) -> Any:
    """Plain JSON (no NaN/inf, no numpy types)."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return clean(json.loads(json.dumps(value, default=_json_default)))


def input_hash(*, kind: str, document: Mapping[str, Any], catalog: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """sha256 over the canonical JSON of everything the engine reads."""
    payload = {"kind": kind, "document": document, "catalog": catalog, "params": params}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def engine_version() -> str:
    return str(ENGINE_VERSION)
