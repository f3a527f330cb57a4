"""Text that can be neither stored nor rendered: NUL and lone UTF-16 surrogates.

PostgreSQL's ``text``/``jsonb`` reject NUL (``\\u0000``); a lone surrogate (``"\\ud800"``, which JSON escapes can
carry) is not valid Unicode at all, so it can be neither stored nor written back in a UTF-8 response. The API's
JSON parser (core/api/parsers.py) and the services that decode JSON from other sources (CSV cells holding
JSON, portal text areas) refuse such text with :func:`find_bad_text`, naming where it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with characters UTF-8 cannot encode written as ``\\udXXX`` escapes (safe in any message)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _why(ch: str) -> str:
    if ch == "\x00":
        return "NUL character (\\u0000) not allowed"
    return f"text is not valid Unicode (lone surrogate {printable(ch)})"


def find_bad_text(value: Any, path: str = "") -> tuple[str, str] | None:
    """``(path, reason)`` of the first NUL or lone surrogate in a string, key or nested value; else None."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            bad = _BAD_TEXT.search(node)
            if bad:
                return where or "body", _why(bad.group())
        elif isinstance(node, dict):
            for key, child in node.items():
                shown = printable(str(key))
                key_path = f"{where}.{shown}" if where else shown
                if isinstance(key, str):
                    bad = _BAD_TEXT.search(key)
                    if bad:
                        return f"{key_path} (a key)", _why(bad.group())
                stack.append((child, key_path))
        elif isinstance(node, list):
            stack.extend((child, f"{where}.{i}" if where else str(i)) for i, child in enumerate(node))
    return None


# ---------------------------------------------------------------------------------- JSON text (issue #23)
# One reader of JSON text from outside — API bodies (core/api/parsers.py), portal text areas and hidden inputs —
# so a hostile document is refused the same way everywhere, before the decoder can recurse or the caller walk it.
MAX_JSON_BYTES = 2 * 1024 * 1024  # the request body limit (DATA_UPLOAD_MAX_MEMORY_SIZE's default)
MAX_JSON_DEPTH = 64  # nesting: scenario and plan documents are < 10 deep; Python's decoder recurses per level
MAX_JSON_ITEMS = 200_000  # keys and values of one document: more than any document this service reads

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class JSONTextError(ValueError):
    """JSON text refused: not JSON, too large, nested too deeply, too many items, or text that cannot be stored.
    ``str(err)`` is a message that can be shown as it is (it quotes no part of the input)."""


def _strict_constant(name: str) -> Any:
    raise JSONTextError(f"{name} is not a JSON number")


def json_depth(text: str) -> int:
    """The deepest nesting of ``text`` (strings skipped), counted without recursion and without decoding."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _count_items(value: Any, limit: int) -> int:
    count, stack = 0, [value]
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            return count
        if isinstance(node, dict):
            count += len(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def loads_json(text: str | bytes, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH,
               max_items: int = MAX_JSON_ITEMS) -> Any:
    """Decode JSON text from outside, refusing (:class:`JSONTextError`, in this order, cheapest first): more than
    ``max_bytes``, nesting deeper than ``max_depth``, invalid JSON (``NaN``/``Infinity`` included), more than
    ``max_items`` keys and values, and NUL or lone surrogates anywhere (:func:`find_bad_text`)."""
    if isinstance(text, bytes | bytearray):
        if len(text) > max_bytes:
            raise JSONTextError(f"is {len(text):,} bytes, more than the limit of {max_bytes:,}")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise JSONTextError("is not valid UTF-8") from None
    elif len(text) > max_bytes:  # characters >= bytes / 4: cheap and never more permissive than the byte limit
        raise JSONTextError(f"is {len(text):,} characters, more than the limit of {max_bytes:,} bytes")
    depth = json_depth(text)
    if depth > max_depth:
        raise JSONTextError(f"is nested {depth:,} levels deep, more than the limit of {max_depth}")
    try:
        value = json.loads(text, parse_constant=_strict_constant)
    except JSONTextError:
        raise
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise JSONTextError(f"is not valid JSON: {reason}{where}") from None
    items = _count_items(value, max_items)
    if items > max_items:
        raise JSONTextError(f"has more than {max_items:,} keys and values")
    found = find_bad_text(value)
    if found is not None:
        raise JSONTextError(f"has text that cannot be stored: {found[1]}, at {found[0]}")
    return value


def parse_id_list(raw: str | None, *, limit: int, what: str = "ids", unique: bool = True) -> list[int]:
    """Comma-separated positive integer ids (duplicates dropped when ``unique``), refused (``ValueError`` with a
    message) when there are more than ``limit`` or one is not an id — checked on the text, before any query."""
    text = raw or ""
    if text.count(",") >= limit * 4 or len(text) > limit * 24:  # far beyond the limit: not even split it
        raise ValueError(f"at most {limit} {what}")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not all(p.isdigit() and len(p) <= 18 for p in parts):
        raise ValueError(f"must be comma-separated {what} (whole numbers)")
    ids = list(dict.fromkeys(int(p) for p in parts)) if unique else [int(p) for p in parts]
    if len(ids) > limit:
        raise ValueError(f"at most {limit} {what}, got {len(ids)}")
    return ids
