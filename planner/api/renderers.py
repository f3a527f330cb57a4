"""The API's JSON renderer: never fails on text that UTF-8 cannot encode.

The parsers refuse such text (a lone surrogate from a ``"\\ud800"`` escape) before it reaches a view, but an
error message may still quote what the client sent. DRF's renderer writes UTF-8 (``UNICODE_JSON``); when that
fails this one writes the same document with ASCII escapes (``\\ud800``), which is valid JSON, instead of
turning a 400 into an HTML 500.
"""

from __future__ import annotations

from typing import Any

from rest_framework.renderers import JSONRenderer


class SafeJSONRenderer(JSONRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: dict[str, Any] | None = None) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            ascii_renderer = JSONRenderer()
            ascii_renderer.ensure_ascii = True
            return ascii_renderer.render(data, accepted_media_type, renderer_context)
