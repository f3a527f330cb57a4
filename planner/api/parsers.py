"""JSON parser that refuses text PostgreSQL cannot store.

PostgreSQL's ``jsonb`` and ``text`` reject the NUL character (``\\u0000``); left alone such a body would
reach the database and fail with a 500. It is refused here as a 400 naming the offending path.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser


def _find_nul(value: Any, path: str = "") -> str | None:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return where or "body"
        elif isinstance(node, dict):
            for key, child in node.items():
                key_path = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and "\x00" in key:
                    return (where or "body") + " (a key)"
                stack.append((child, key_path))
        elif isinstance(node, list):
            stack.extend((child, f"{where}.{i}" if where else str(i)) for i, child in enumerate(node))
    return None


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        where = _find_nul(data)
        if where is not None:
            raise ParseError(f"JSON parse error - NUL character (\\u0000) not allowed, at {where}.")
        return data


def _check_form(data: Any) -> None:
    # Form fields may carry JSON text that a serializer's JSONField decodes later: refuse the escape too.
    for key in getattr(data, "keys", lambda: [])():
        for value in data.getlist(key) if hasattr(data, "getlist") else [data[key]]:
            if isinstance(value, str) and ("\x00" in value or "\\u0000" in value):
                raise ParseError(f"NUL character (\\u0000) not allowed, in form field {key!r}.")


class SafeFormParser(FormParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        _check_form(data)
        return data


class SafeMultiPartParser(MultiPartParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        result = super().parse(stream, media_type, parser_context)
        _check_form(result.data)
        return result
