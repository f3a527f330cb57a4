"""Shared by the ``predict`` and ``tco`` commands: read a scenario document from a file or stdin."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError


def read_document(path: str) -> Any:
    """Parse the JSON document at ``path`` (``-`` = stdin); CommandError with one line on failure."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
