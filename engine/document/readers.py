"""Reading one field of a scenario document: each reader checks the value against the field's declaration
(engine.schema.fields: kind, choices, "auto") and bound (engine.schema.bounds) and raises a ScenarioError naming the
field with a machine code. The section parsers (parse.py, workload.py) are built from these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import INVALID, NOT_A_CHOICE, REQUIRED, UNKNOWN_KEY, WRONG_TYPE, ScenarioError
from engine.schema.bounds import check_int, check_number
from engine.schema.fields import AUTO, BY_PATH, field


class _Declared:
    """The default of a helper's ``default``: the field's static default in the declaration."""


DECLARED: Any = _Declared()


def declared_default(name: str) -> Any:
    f = BY_PATH.get(name)
    if f is None or f.required or f.default_by:
        return None
    return f.default


def read_mapping(doc: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ScenarioError(path, f"must be an object, got {type(doc).__name__}", WRONG_TYPE)
    return doc


def check_keys(doc: Mapping[str, Any], allowed: set[str], required: tuple[str, ...], path: str) -> None:
    for key in doc:
        if key not in allowed:
            raise ScenarioError(f"{path}.{key}" if path else str(key), f"unknown key; allowed: {', '.join(sorted(allowed))}",
                                UNKNOWN_KEY)
    for key in required:
        if key not in doc:
            raise ScenarioError(f"{path}.{key}" if path else key, "is required", REQUIRED)


def read_int(doc: Mapping[str, Any], key: str, path: str, default: Any = DECLARED) -> Any:
    """An integer field, checked against its bound in :data:`engine.schema.bounds.BOUNDS`; ``"auto"`` (None)
    where the declaration accepts it."""
    name = f"{path}.{key}"
    value = doc.get(key, declared_default(name) if default is DECLARED else default)
    if value is None:
        raise ScenarioError(name, "is required", REQUIRED)
    allow_auto = field(name).auto
    if allow_auto and value == AUTO:
        return None
    if isinstance(value, str):
        extra = ' or "auto"' if allow_auto else ""
        raise ScenarioError(name, f"must be an integer{extra}, got {value!r}", WRONG_TYPE)
    return check_int(value, name)


def read_number(doc: Mapping[str, Any], key: str, path: str, default: Any = DECLARED) -> float:
    """A number field, checked against its bound in :data:`engine.schema.bounds.BOUNDS`."""
    name = f"{path}.{key}"
    value = doc.get(key, declared_default(name) if default is DECLARED else default)
    if value is None:
        raise ScenarioError(name, "is required", REQUIRED)
    return check_number(value, name)


def read_choice(doc: Mapping[str, Any], key: str, path: str, default: Any = DECLARED) -> str | None:
    """A value of the field's enum (:mod:`engine.schema.enums`); ``"auto"`` (None) where the declaration accepts it."""
    name = f"{path}.{key}"
    f = field(name)
    assert f.choices is not None, name
    value = doc.get(key, declared_default(name) if default is DECLARED else default)
    if value is None:
        raise ScenarioError(name, "is required", REQUIRED)
    if f.auto and value == AUTO:
        return None
    options = f.choices.values()
    if not isinstance(value, str) or value not in options:
        extra = ' or "auto"' if f.auto else ""
        raise ScenarioError(name, f"must be one of {', '.join(options)}{extra}, got {value!r}", NOT_A_CHOICE)
    return value


def read_choice_set(doc: Mapping[str, Any], key: str, path: str) -> tuple[str, ...] | None:
    """A list of distinct values of the field's enum, in the enum's order; None when the key is absent."""
    name = f"{path}.{key}"
    f = field(name)
    assert f.choices is not None, name
    value = doc.get(key)
    if value is None:
        return None
    options = f.choices.values()
    if not isinstance(value, list) or not value:
        raise ScenarioError(name, f"must be a non-empty list of {', '.join(options)}, got {value!r}"[:300], WRONG_TYPE)
    for i, item in enumerate(value):
        if not isinstance(item, str) or item not in options:
            raise ScenarioError(f"{name}.{i}", f"must be one of {', '.join(options)}, got {item!r}"[:300],
                                NOT_A_CHOICE)
    if len(set(value)) != len(value):
        raise ScenarioError(name, "lists a module twice", INVALID)
    return tuple(o for o in options if o in value)


def read_bool(doc: Mapping[str, Any], key: str, path: str, default: bool | None, allow_auto: bool = False) -> bool | None:
    value = doc.get(key, default)
    if allow_auto and value == AUTO:
        return None
    if not isinstance(value, bool):
        raise ScenarioError(f"{path}.{key}", f"must be true or false, got {value!r}", WRONG_TYPE)
    return value


def read_key(doc: Mapping[str, Any], key: str, path: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise ScenarioError(f"{path}.{key}", f"must be a catalog key string, got {value!r}", WRONG_TYPE)
    return value
