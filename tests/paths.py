"""Where things are, independent of how deep a test module sits (tests mirror the apps, so depths differ)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
DATA = ROOT / "tests" / "data"  # published reference figures and synthetic calibration files
