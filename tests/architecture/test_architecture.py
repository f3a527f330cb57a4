"""The house keeps its shape: arrows point down, no circles, no god-modules (issue #12)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("planner", "core", "accounts", "planning", "simulations", "portal")
MAX_LINES = 500


def test_no_module_over_500_lines() -> None:
    """Outside migrations and tests, a module that grows past 500 lines is split by concept."""
    too_long = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                too_long[str(path.relative_to(ROOT))] = lines
    assert too_long == {}


def test_import_contracts_hold() -> None:
    """import-linter (contracts in pyproject.toml): app layers, layers inside apps, a pure engine, no DRF below
    the API, no task imports from the domain, and no import circle between sibling modules."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    result = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_a_new_upward_import_would_break_a_contract(tmp_path: Path) -> None:
    """The contracts catch what they promise: a service importing the API layer is reported."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed")
    pkg = tmp_path / "house"
    for sub in ("", "api", "services"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "api" / "views.py").write_text("from house.services import run\n")
    (pkg / "services" / "run.py").write_text("from house.api import views\n")  # upward, and a circle
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = house\n\n"
        "[importlinter:contract:layers]\nname = layers\ntype = layers\nlayers =\n    house.api\n    house.services\n"
    )
    result = subprocess.run([exe, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            check=False, env={"PYTHONPATH": str(tmp_path), "PATH": str(Path(exe).parent)})
    assert result.returncode != 0 and "house.services.run -> house.api" in result.stdout, result.stdout
