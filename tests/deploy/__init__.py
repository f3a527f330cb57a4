"""Deployment artefact tests: docker-compose.yml, Dockerfile, .env.example and deploy/ manifests.

Shared helpers live here: reading .env.example, and checking that a container command refers to
things that exist in this project (the WSGI callable, the Celery app and its queues, management
commands, importable scheduler classes).
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ENV_EXAMPLE = ROOT / ".env.example"

# Variables a subprocess must not inherit from the developer's shell or CI (they change the mode).
SETTINGS_VARS = (
    "DJANGO_ENV",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DEBUG",
    "DATABASE_URL",
    "REDIS_URL",
    "CONN_MAX_AGE",
    "LOG_LEVEL",
    "LOG_JSON",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "CELERY_TASK_TIME_LIMIT",
    "CELERY_TASK_SOFT_TIME_LIMIT",
    "CELERY_VISIBILITY_TIMEOUT",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "CELERY_TASK_ALWAYS_EAGER",
    "FP_DEMO_PASSWORD",
    "FP_RUN_STUCK_AFTER_S",
    "FP_WEB_TIMEOUT_S",
    "FP_WEB_ENGINE_BUDGET_S",
    "FP_RUN_SOFT_TIME_LIMIT_S",
    "FP_RUN_TIME_LIMIT_S",
    "FP_RUN_BUDGET_S",
    "FP_MAX_SWEEP_RUNS",
    "FP_WEBHOOK_ALLOW_PRIVATE",
    "FP_VAR_DIR",
    "THROTTLE_TOKEN",
    "DATA_UPLOAD_MAX_MEMORY_SIZE",
)

_VAR_LINE = re.compile(r"^\s*(#\s*)?([A-Z][A-Z0-9_]*)=")


def clean_env(**overrides: str) -> dict[str, str]:
    """A copy of os.environ without the settings variables, plus ``overrides``."""
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARS}
    env["DJANGO_SETTINGS_MODULE"] = "planner.settings"
    env.update(overrides)
    return env


def documented_vars(path: Path = ENV_EXAMPLE) -> dict[str, bool]:
    """Variable name -> whether it is explained by a comment in its block.

    A variable counts as documented when it is assigned (``NAME=value``) or shown commented out
    (``# NAME=``). It is explained when a comment line precedes it in the same block (blocks are
    separated by blank lines), so every assignment carries a description.
    """
    found: dict[str, bool] = {}
    commented_block = False
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line:
            commented_block = False
            continue
        m = _VAR_LINE.match(line)
        if m:
            found.setdefault(m.group(2), commented_block)
            if m.group(1):  # a commented-out example is itself documentation for what follows
                commented_block = True
            continue
        if line.startswith("#"):
            commented_block = True
    return found


def env_example_values(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        values[name.strip()] = value.strip()
    return values


def split_shell(argv: list[str]) -> list[list[str]]:
    """``["sh", "-c", "a && b"]`` -> ``[["a"], ["b"]]``; any other argv -> ``[argv]``."""
    if len(argv) >= 3 and Path(argv[0]).name in ("sh", "bash") and argv[1] == "-c":
        script = argv[2].replace("$$", "$")
        return [shlex.split(part) for part in re.split(r"&&|;", script) if part.strip()]
    return [argv]


def as_argv(command: str | list[str]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def _strip_python(argv: list[str]) -> list[str]:
    """``python -m celery ...`` -> ``celery ...``; ``python manage.py ...`` stays."""
    if argv and Path(argv[0]).name.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        return argv[2:]
    return argv


def _option(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def command_problems(command: str | list[str]) -> list[str]:
    """What in a container command does not exist in this project (empty list when all is well).

    Runs in-process, so Django must be set up (pytest-django does it).
    """
    from django.core.management import get_commands

    from planner.celery import app as celery_app

    problems: list[str] = []
    for argv in split_shell(as_argv(command)):
        argv = _strip_python(argv)
        prog = Path(argv[0]).name
        if prog == "gunicorn":
            specs = [a for a in argv[1:] if ":" in a and not a.startswith("-") and not a[0].isdigit()]
            if len(specs) != 1:
                problems.append(f"{argv}: expected one MODULE:CALLABLE argument")
                continue
            module_name, attr = specs[0].split(":", 1)
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:
                problems.append(f"{specs[0]}: cannot import {module_name}: {exc!r}")
                continue
            if not callable(getattr(module, attr, None)):
                problems.append(f"{specs[0]}: {module_name}.{attr} is missing or not callable")
        elif prog == "celery":
            if _option(argv, "-A", "--app") != "planner":
                problems.append(f"{argv}: expected the Celery app 'planner' (-A planner)")
            queues = _option(argv, "-Q", "--queues")
            if queues:
                declared = {q.name for q in celery_app.conf.task_queues or ()}
                for q in queues.split(","):
                    if q not in declared:
                        problems.append(f"{argv}: queue {q!r} is not declared in planner/celery.py")
            scheduler = _option(argv, "-S", "--scheduler")
            if scheduler:
                module_name, _, attr = scheduler.replace(":", ".").rpartition(".")
                try:
                    getattr(importlib.import_module(module_name), attr)
                except Exception as exc:
                    problems.append(f"{argv}: scheduler {scheduler} not importable: {exc!r}")
        elif prog.startswith("python") and len(argv) > 2 and argv[1] == "manage.py":
            if argv[2] not in get_commands():
                problems.append(f"manage.py {argv[2]}: no such management command")
        elif prog.startswith("python") and len(argv) > 2 and argv[1] == "-c":
            try:
                compile(argv[2], "<probe>", "exec")
            except SyntaxError as exc:
                problems.append(f"python -c: {exc}")
        else:
            problems.append(f"{argv}: unknown program {prog!r} (expected gunicorn, celery or python)")
    return problems


def celery_commands(commands: Iterable[str | list[str]]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for command in commands:
        for argv in split_shell(as_argv(command)):
            argv = _strip_python(argv)
            if argv and Path(argv[0]).name == "celery":
                out.add(tuple(argv))
    return out


def run_celery_help(argv: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """Run ``python -m celery <args> --help``: the Celery app loads and every option is known."""
    args = [a.replace("$HOSTNAME", "celery-test-host") for a in argv[1:]]
    return subprocess.run(
        [PYTHON, "-m", "celery", *args, "--help"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
