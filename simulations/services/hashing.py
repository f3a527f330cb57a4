"""Canonical JSON, plain-JSON cleaning and the input hash that makes runs idempotent."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from engine.version import ENGINE_VERSION


class EngineJSONEncoder(DjangoJSONEncoder):
    """Django's encoder (dates, times, decimals, UUIDs, lazy strings) plus what the engine returns:
    numpy scalars and arrays (``tolist``) and result dataclasses (``to_dict``). Anything else is its ``str``."""

    def default(self, o: Any) -> Any:
        if hasattr(o, "tolist"):
            return o.tolist()
        if hasattr(o, "to_dict"):
            return o.to_dict()
        try:
            return super().default(o)
        except TypeError:
            return str(o)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, cls=EngineJSONEncoder)


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

    return clean(json.loads(json.dumps(value, cls=EngineJSONEncoder)))


def input_hash(*, kind: str, document: Mapping[str, Any], catalog: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """sha256 over the canonical JSON of everything the engine reads."""
    payload = {"kind": kind, "document": document, "catalog": catalog, "params": params}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def engine_version() -> str:
    return str(ENGINE_VERSION)
