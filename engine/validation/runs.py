"""The published-run sets: where they are, how they load, and which publication each row comes from.

Each set is a JSON document (``engine/validation/data/*_runs.json``) whose ``runs`` hold a scenario document,
the one figure the source measured (``measured``, one of :data:`COMPARABLE`) and the ``source``. The sets ship
with the engine package. Rows only validate the engine: no constant may be set from them (issue #22).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNS_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_RUNS = RUNS_DIR / "published_runs.json"
HOLDOUT_RUNS = RUNS_DIR / "holdout_runs.json"
BLACKWELL_RUNS = RUNS_DIR / "blackwell_runs.json"
NETWORK_RUNS = RUNS_DIR / "network_runs.json"
FABRIC_MEASUREMENTS = RUNS_DIR / "fabric_measurements.json"
COMPARABLE = ("hardware_tflops_per_gpu", "model_tflops_per_gpu", "mfu", "step_time_s", "tokens_per_s_per_gpu",
              "gpu_hours")
# measured quantities that fall when the run goes faster (the others are per-GPU throughput figures)
TIME_LIKE = ("step_time_s", "gpu_hours")


@dataclass(frozen=True)
class RunSet:
    """One validation set: a key, the title the report gives it and its file."""

    key: str
    title: str
    path: Path


RUN_SETS = (
    RunSet("published", "Reference (public)", DEFAULT_RUNS),
    RunSet("holdout", "Holdout", HOLDOUT_RUNS),
    RunSet("network", "Network-bound", NETWORK_RUNS),
    RunSet("blackwell", "Blackwell (B200 + H100 controls)", BLACKWELL_RUNS),
)

_ARXIV = re.compile(r"arXiv \d{4}\.\d{4,5}")


def load_runs(path: Path | str | None = None) -> list[dict[str, Any]]:
    doc = json.loads(Path(path or DEFAULT_RUNS).read_text(encoding="utf-8"))
    runs: list[dict[str, Any]] = doc["runs"]
    return runs


def source_key(source: str) -> str:
    """The publication a row comes from, the unit that leave-one-source-out leaves out.

    The first arXiv identifier the source names (two arms of one paper, or two tables of it, are one
    source); without one, the text before the first parenthesis or comma (a vendor's performance summary of
    one release, a repository's benchmark page)."""
    m = _ARXIV.search(source)
    if m:
        return m.group(0)
    return re.split(r"[(,]", source, maxsplit=1)[0].strip() or source
