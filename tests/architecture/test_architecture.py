"""The house keeps its shape: arrows point down, no circles, no god-modules, tests mirror the apps (issue #12)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "planner", "core", "accounts", "planning", "simulations", "portal")
MAX_LINES = 500
# tests/ mirrors the apps: tests/<app>/<sub>/ holds the tests of <app>/<sub> (tests/engine/fleet/ for
# engine/fleet/). Besides the apps, only these cross-cutting suites and the data folder sit in tests/.
CROSS_CUTTING = ("architecture", "security", "integration", "browser", "deploy")
NOT_PACKAGES = ("data",)  # reference figures and calibration files, no Python
RETIRED = ("domain", "foundation")  # the old grouping by kind; must not come back
RETIRED_APP_FOLDERS = (("simulations", "engine"),)  # the engine left the top app for the bottom layer (#21)


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


def layout_problems(root: Path, apps: tuple[str, ...] = PACKAGES) -> list[str]:
    """What in ``root/tests`` breaks the mirrored layout (empty when the layout holds)."""
    tests = root / "tests"
    problems: list[str] = []
    problems += [f"tests/{p.name}: test modules live in the folder of the app they test, not at the top"
                 for p in sorted(tests.glob("test_*.py"))]
    for folder in sorted(p for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"):
        name = folder.name
        if name in RETIRED:
            problems.append(f"tests/{name}/: the old grouping by kind is retired; put tests under "
                            f"tests/<app>/ (e.g. tests/engine/) or a cross-cutting suite")
        elif name not in (*apps, *CROSS_CUTTING, *NOT_PACKAGES):
            problems.append(f"tests/{name}/: neither an app ({', '.join(apps)}) nor a cross-cutting suite "
                            f"({', '.join(CROSS_CUTTING)})")
    for folder in sorted({p.parent for p in tests.rglob("*.py")} - {tests}):
        if "__pycache__" in folder.parts:
            continue
        rel = folder.relative_to(root)
        if not (folder / "__init__.py").exists():
            problems.append(f"{rel}/: no __init__.py (test folders are packages, so equal basenames are fine)")
        app, *sub = folder.relative_to(tests).parts
        if (app, *sub[:1]) in RETIRED_APP_FOLDERS:
            problems.append(f"{rel}/: the engine is the top-level package engine/ now; its tests live in tests/engine/")
        elif app in apps and sub:
            source = root.joinpath(app, *sub)
            if not (source.is_dir() or source.with_suffix(".py").is_file()):
                problems.append(f"{rel}/: mirrors nothing; {source.relative_to(root)} is neither a package "
                                f"nor a module")
    return problems


def test_tests_mirror_the_apps() -> None:
    """A reader finds a module's tests where the module lives; the old flat folders do not come back."""
    assert layout_problems(ROOT) == []


def test_a_regressed_layout_is_reported(tmp_path: Path) -> None:
    """The layout check catches what it promises: a test back in tests/simulations/engine, a test at the top of
    tests/, an app test folder without __init__.py, a folder that mirrors no package, and an unknown suite."""
    (tmp_path / "simulations").mkdir(parents=True)
    (tmp_path / "engine" / "fleet").mkdir(parents=True)
    tests = tmp_path / "tests"
    for folder, files in {
        "": ("__init__.py", "conftest.py", "test_loose.py"),
        "domain": ("__init__.py", "test_capacity_plans.py"),
        "simulations": ("__init__.py",),
        "simulations/engine": ("__init__.py", "test_perf.py"),
        "engine": ("__init__.py",),
        "engine/fleet": ("test_sim.py",),
        "simulations/widgets": ("__init__.py", "test_widgets.py"),
        "misc": ("__init__.py", "test_misc.py"),
    }.items():
        (tests / folder).mkdir(parents=True, exist_ok=True)
        for name in files:
            (tests / folder / name).write_text("def test_x() -> None:\n    assert True\n")
    problems = "\n".join(layout_problems(tmp_path, apps=("simulations", "engine")))
    for expected in ("tests/test_loose.py", "tests/simulations/engine/: the engine is", "tests/domain/", "tests/misc/",
                     "tests/engine/fleet/: no __init__.py", "tests/simulations/widgets/: mirrors nothing"):
        assert expected in problems, problems
    assert "tests/simulations/: " not in problems, problems


def test_the_test_files_scripts_name_exist() -> None:
    """`make fuzz`, CI and the Makefile name test files by path; a file moved without them makes the command fail
    (scripts/fuzz.sh named tests/engine/test_calibration_import.py for a while after it moved to calibration/)."""
    import re

    named = {path for script in [ROOT / "Makefile", ROOT / ".ci/run", *sorted((ROOT / "scripts").glob("*.sh"))]
             for path in re.findall(r"\btests/[\w/]+\.py\b", script.read_text(encoding="utf-8"))}
    assert named, "no script names a test file: the pattern no longer matches"
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []
