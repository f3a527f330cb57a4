"""The engine house keeps its shape (issue #21): each name defined once, imported from where it is defined,
and the step model's functions short enough to read."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMPORTERS = ("engine", "planner", "core", "accounts", "planning", "simulations", "portal", "tests", "scripts",
             "benchmarks")
MAX_FUNCTION_LINES = 100


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _module_path(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def names_defined_twice(root: Path) -> dict[str, list[str]]:
    """Public names defined at the top level of two or more engine modules."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted((root / "engine").rglob("*.py")):
        for name in _top_level_names(ast.parse(path.read_text(encoding="utf-8"))):
            if not name.startswith("_"):
                where[name].append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def imports_through_shims(root: Path, importers: tuple[str, ...] = IMPORTERS) -> list[str]:
    """``from engine.X import name`` where ``name`` is neither defined in X nor a submodule of X (the package
    facade ``engine.predict`` / ``search`` / ``tco`` is for callers outside the project, so it counts too)."""
    defined: dict[str, set[str]] = {}
    problems = []
    for folder in importers:
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else []:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                        and node.module.split(".")[0] == "engine"):
                    continue
                source = _module_path(root, node.module)
                if source is None:
                    problems.append(f"{path.relative_to(root)}:{node.lineno}: no module {node.module}")
                    continue
                if node.module not in defined:
                    defined[node.module] = _top_level_names(ast.parse(source.read_text(encoding="utf-8")))
                for alias in node.names:
                    name = alias.name
                    if name in defined[node.module] or _module_path(root, f"{node.module}.{name}") is not None:
                        continue
                    problems.append(f"{path.relative_to(root)}:{node.lineno}: {name} is not defined in "
                                    f"{node.module}; import it from the module that defines it")
    return problems


def long_functions(root: Path, package: str = "engine/performance", limit: int = MAX_FUNCTION_LINES) -> list[str]:
    out = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    out.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: {length} lines")
    return out


def test_no_public_name_is_defined_in_two_engine_modules() -> None:
    assert names_defined_twice(ROOT) == {}


def test_every_engine_name_is_imported_from_the_module_that_defines_it() -> None:
    assert imports_through_shims(ROOT) == []


def test_no_function_in_the_step_model_is_over_100_lines() -> None:
    assert long_functions(ROOT) == []


def test_the_checks_catch_what_they_promise(tmp_path: Path) -> None:
    """A twice-defined name, an import through a re-export and a 101-line function are each reported."""
    perf = tmp_path / "engine" / "performance"
    perf.mkdir(parents=True)
    (tmp_path / "engine" / "__init__.py").write_text("")
    (perf / "__init__.py").write_text("")
    (perf / "model.py").write_text("EFF = 0.5\n\ndef f() -> int:\n" + "    x = 1\n" * 99 + "    return x\n")
    (perf / "memory.py").write_text("from engine.performance.model import EFF\nEFF2 = EFF\nLIMIT = 1\n")
    (perf / "api.py").write_text("LIMIT = 2\n")
    (tmp_path / "portal").mkdir()
    (tmp_path / "portal" / "views.py").write_text("from engine.performance.memory import EFF\n"
                                                  "from engine.performance import model\n")
    assert names_defined_twice(tmp_path) == {"LIMIT": ["engine/performance/api.py", "engine/performance/memory.py"]}
    shims = imports_through_shims(tmp_path, importers=("portal",))
    assert len(shims) == 1 and "EFF is not defined in engine.performance.memory" in shims[0]
    assert [s.split(" ")[1] for s in long_functions(tmp_path)] == ["f:"]
