"""Text that can be neither stored nor rendered: NUL and lone UTF-16 surrogates.

PostgreSQL's ``text``/``jsonb`` reject NUL (``\\u0000``); a lone surrogate (``"\\ud800"``, which JSON escapes can
carry) is not valid Unicode at all, so it can be neither stored nor written back in a UTF-8 response. The API's
JSON parser (core/api/parsers.py) and the services that decode JSON from other sources (CSV cells holding
JSON, portal text areas) refuse such text with :func:`find_bad_text`, naming where it is.
"""

from __future__ import annotations

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
