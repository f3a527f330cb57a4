"""The API's JSON renderer: never fails on text that UTF-8 cannot encode.

The parsers refuse such text (a lone surrogate from a ``"\\ud800"`` escape) before it reaches a view, but an
error message may still quote what the client sent. DRF's renderer writes UTF-8 (``UNICODE_JSON``); when that
fails this one writes the same document with ASCII escapes (``\\ud800``), which is valid JSON, instead of
turning a 400 into an HTML 500.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import JSONRenderer


class _AsciiJSONRenderer(JSONRenderer):
    ensure_ascii = True


class SafeJSONRenderer(JSONRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> Any:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return _AsciiJSONRenderer().render(data, accepted_media_type, renderer_context)
