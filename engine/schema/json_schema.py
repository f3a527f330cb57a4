"""The JSON Schema of the scenario document's sections and fields, derived from the one declaration
(:data:`engine.schema.fields.FIELDS`) for the API's OpenAPI description (``planning.api.serializers``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.schema.enums import Distribution
from engine.schema.fields import AUTO, BY_PATH, required, section_fields


def json_schema(section: str, *, partial: bool = False) -> dict[str, Any]:
    """The JSON Schema of ``section`` (an object of its declared keys), for the API's OpenAPI description;
    ``partial``: no key required (a scenario's ``cluster`` may hold only overrides of its fleet's)."""
    props = {f.key: field_schema(f.path) for f in section_fields(section)}
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required(section) and not partial:
        out["required"] = list(required(section))
    return out


_JSON_TYPES = {"int": "integer", "number": "number", "bool": "boolean", "choice": "string", "choices": "array",
               "string": "string",
               "key": "string"}
_RANGE_SCHEMA: dict[str, Any] = {"type": "object", "description": "a range", "required": ["low", "high"],
                                 "properties": {k: {"type": "number"} for k in ("low", "likely", "high")}
                                 | {"dist": {"type": "string", "enum": list(Distribution.values())}}}


def field_schema(path: str) -> dict[str, Any]:
    """The JSON Schema of one declared field (type, enum, bounds, "auto", lists and ranges where accepted)."""
    f = BY_PATH[path]
    if f.kind == "object":
        nested = json_schema(f.path) if section_fields(f.path) else {"type": "object"}
        if f.auto:
            nested = {"oneOf": [nested, {"type": "string", "enum": [AUTO]}]}
        return {**nested, "description": f.help}
    one: dict[str, Any] = {"type": _JSON_TYPES[f.kind]}
    if f.kind == "choices" and f.choices is not None:
        one["items"] = {"type": "string", "enum": list(f.choices.values())}
        one["uniqueItems"] = True
    elif f.choices is not None:
        one["enum"] = list(f.choices.values())
    bound = f.bound
    if bound is not None:
        cast = int if f.kind == "int" else float
        one["exclusiveMinimum" if bound.lo_open else "minimum"] = cast(bound.lo)
        one["maximum"] = cast(bound.hi)
    options = [one]
    if f.auto:
        options.append({"type": "string", "enum": [AUTO]})
    if f.listed:
        options.append({"type": "array", "items": one, "minItems": 1, "maxItems": 16})
    if f.ranged:
        options.append(_RANGE_SCHEMA)
    out: dict[str, Any] = options[0] if len(options) == 1 else {"oneOf": options}
    out = {**out, "description": f"{f.help}. " + ("Required." if f.required else f"Default: {f.default_words()}.")}
    if not f.required and not f.default_by and f.default is not None and not isinstance(f.default, Mapping):
        out["default"] = f.default
    return out
