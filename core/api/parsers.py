"""JSON parser that refuses text PostgreSQL cannot store and UTF-8 cannot encode, and documents too large, too
deep or with too many items to walk (the one reader, :func:`core.text.loads_json`, that the portal's forms use too).

PostgreSQL's ``jsonb`` and ``text`` reject the NUL character (``\\u0000``), and a lone UTF-16 surrogate
(``"\\ud800"``, which JSON escapes can carry) is not valid Unicode at all: it can be neither stored nor written
back in a UTF-8 response. Left alone such a body would reach the database or the renderer and fail with a
500. Either is refused here as a 400 naming the offending path, keys included, with the bad character escaped.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

from core.text import JSONTextError, loads_json


class SafeJSONParser(JSONParser):
    """DRF's JSON parser through :func:`core.text.loads_json`: size, depth (checked before decoding, so the decoder
    never recurses 100,000 levels), strict numbers (no NaN), item count, NUL and lone surrogates — each a 400."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2 * 1024 * 1024)
        raw = stream.read(limit + 1) if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (LookupError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - the body is not valid {encoding} ({type(exc).__name__}).") from None
        try:
            return loads_json(text, max_bytes=limit)
        except JSONTextError as exc:
            raise ParseError(f"JSON parse error - {exc}.") from None


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
