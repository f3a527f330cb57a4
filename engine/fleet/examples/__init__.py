"""Example capacity plans shipped with the engine (the CLI, `make run`'s demo data and the tests use them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def demo_plan() -> dict[str, Any]:
    """4,096 A100 + 16,384 H100, three deadline runs and growing experimentation; B300 purchase options."""
    data: dict[str, Any] = json.loads((HERE / "demo_plan.json").read_text(encoding="utf-8"))
    return data
