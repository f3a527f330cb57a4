"""Project-wide guarantees: migrations in sync, the engine free of Django, layering one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_no_missing_migrations() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits 1 when models and migrations disagree
        pytest.fail(f"models changed without migrations:\n{out.getvalue()} (exit {exc.code})")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_engine_source_imports_no_django_or_upper_layers() -> None:
    engine = ROOT / "engine"
    offenders = {}
    for path in engine.rglob("*.py"):
        bad = {
            name for name in _imports(path)
            if name.split(".")[0] in ("django", "rest_framework", "celery", "accounts", "planner", "planning", "portal")
            or name.startswith(("simulations.models", "simulations.services", "simulations.tasks"))
        }
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_engine_imports_standalone_without_django_loaded() -> None:
    code = (
        "import sys; import engine as e; from engine import catalog; "
        "catalog.default_catalog(); "
        "assert not any(m == 'django' or m.startswith('django.') for m in sys.modules), 'django imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_views_do_not_import_the_engine_directly() -> None:
    """Layering: portal and API views go through services, never straight to the engine."""
    offenders = {}
    for path in (
        list((ROOT / "portal").rglob("*views*.py")) + list((ROOT / "portal" / "views").glob("*.py"))
        + list(ROOT.glob("*/api/views*.py")) + list(ROOT.glob("*/api/views/*.py"))
    ):
        bad = {n for n in _imports(path) if n.startswith("engine")}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}
