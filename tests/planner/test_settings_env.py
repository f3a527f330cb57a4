"""planner/settings.py driven by the environment, exercised in fresh interpreters.

Each case starts a subprocess (cwd = the repository root) with a copy of os.environ from which all
settings variables are removed, plus the variables under test, so the developer's shell or CI
cannot change the outcome.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy import SETTINGS_VARS
from tests.paths import ROOT

PYTHON = sys.executable
SETUP = "import django; django.setup()"
ERROR_PREFIX = "django.core.exceptions.ImproperlyConfigured:"

# The deploy tests' list (every variable settings.py reads), plus Django's own async-safety escape hatch,
# which the browser tests set and a production check must never inherit.
_SETTINGS_VARS = (*SETTINGS_VARS, "DJANGO_ALLOW_ASYNC_UNSAFE")


def _env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in _SETTINGS_VARS}
    env["DJANGO_SETTINGS_MODULE"] = "planner.settings"
    env["FP_VAR_DIR"] = str(tmp_path / "var")  # keep SQLite files out of the work tree
    env.update(overrides)
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def _setup(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    return _run([PYTHON, "-c", SETUP], _env(tmp_path, **overrides))


def _key() -> str:
    return secrets.token_urlsafe(64)


def _error_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith(ERROR_PREFIX)]


def _assert_one_clear_error(proc: subprocess.CompletedProcess[str], variable: str) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    errors = _error_lines(proc)
    assert len(errors) == 1, proc.stderr[-3000:]
    message = errors[0][len(ERROR_PREFIX) :].strip()
    assert message.startswith(f"{variable}:"), message
    # It is the last thing printed: the reason is not buried under later output.
    assert proc.stderr.strip().splitlines()[-1] == errors[0]
    return message


# --- invalid configurations fail fast with a message naming the variable ----------------------------
def test_production_requires_secret_key(tmp_path: Path) -> None:
    proc = _setup(tmp_path, DJANGO_ENV="production", ALLOWED_HOSTS="planner.example.com")
    message = _assert_one_clear_error(proc, "SECRET_KEY")
    assert "production" in message


def test_production_rejects_short_secret_key(tmp_path: Path) -> None:
    proc = _setup(tmp_path, DJANGO_ENV="production", SECRET_KEY="x" * 20, ALLOWED_HOSTS="planner.example.com")
    _assert_one_clear_error(proc, "SECRET_KEY")


def test_production_requires_allowed_hosts(tmp_path: Path) -> None:
    proc = _setup(tmp_path, DJANGO_ENV="production", SECRET_KEY=_key())
    _assert_one_clear_error(proc, "ALLOWED_HOSTS")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DATABASE_URL", "notaurl"),
        # A misspelt scheme: django-environ passes it through as an ENGINE name.
        ("DATABASE_URL", "postgress://planner:pw@db.example.com:5432/planner"),
        ("REDIS_URL", "http://x"),
        ("REDIS_URL", "localhost:6379"),
        ("DEBUG", "maybe"),
        ("DJANGO_ENV", "staging"),
        ("LOG_JSON", "sometimes"),
        ("CELERY_TASK_TIME_LIMIT", "15m"),
        ("FP_MAX_SWEEP_RUNS", "many"),
        ("DATA_UPLOAD_MAX_MEMORY_SIZE", "2MB"),
    ],
)
def test_malformed_value_names_the_variable(tmp_path: Path, variable: str, value: str) -> None:
    proc = _setup(tmp_path, **{variable: value})
    _assert_one_clear_error(proc, variable)


def test_secure_hsts_seconds_checked_in_production(tmp_path: Path) -> None:
    proc = _setup(
        tmp_path,
        DJANGO_ENV="production",
        SECRET_KEY=_key(),
        ALLOWED_HOSTS="h.example.com",
        SECURE_HSTS_SECONDS="a year",
    )
    _assert_one_clear_error(proc, "SECURE_HSTS_SECONDS")


# --- valid configurations ---------------------------------------------------------------------------
PRINT = (
    SETUP + "\nfrom django.conf import settings as s\n"
    "print(s.DATABASES['default']['ENGINE'], s.DATABASES['default'].get('HOST', ''), s.CELERY_BROKER_URL, "
    "s.CACHES['default']['BACKEND'], s.DEBUG, s.ALLOWED_HOSTS)\n"
)


def test_full_mode_urls_are_used(tmp_path: Path) -> None:
    proc = _run(
        [PYTHON, "-c", PRINT],
        _env(
            tmp_path,
            DATABASE_URL="postgres://planner:pw@db.internal:5432/planner",
            REDIS_URL="redis://cache.internal:6379/0",
        ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    engine, host, broker, cache, *_ = proc.stdout.split()
    assert engine == "django.db.backends.postgresql"
    assert host == "db.internal"
    assert broker == "redis://cache.internal:6379/0"
    assert cache == "django.core.cache.backends.redis.RedisCache"


def test_default_mode_without_urls(tmp_path: Path) -> None:
    proc = _run([PYTHON, "-c", PRINT], _env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    engine, *_rest = proc.stdout.split()
    assert engine == "django.db.backends.sqlite3"
    assert "True" in proc.stdout  # DEBUG defaults on outside production


def _check_deploy(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    return _run([PYTHON, "manage.py", "check", "--deploy"], _env(tmp_path, **overrides))


def test_production_check_deploy_is_clean(tmp_path: Path) -> None:
    proc = _check_deploy(
        tmp_path, DJANGO_ENV="production", SECRET_KEY=_key(), ALLOWED_HOSTS="planner.example.com"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "System check identified no issues" in output, output[-4000:]


def test_kubernetes_configmap_passes_check_deploy(tmp_path: Path) -> None:
    """The ConfigMap in deploy/ plus a Secret of the documented shape gives a clean deploy check."""
    config = yaml.safe_load((ROOT / "deploy" / "configmap.yaml").read_text())["data"]
    config = {k: v for k, v in config.items() if k != "FP_VAR_DIR"}  # /app/var exists only in the image
    proc = _check_deploy(
        tmp_path,
        **config,
        SECRET_KEY=_key(),
        DATABASE_URL="postgres://planner:pw@postgres.example.internal:5432/planner",
        REDIS_URL="redis://redis.example.internal:6379/0",
        FP_DEMO_PASSWORD="not-the-default-demo-password",
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "System check identified no issues" in output, output[-4000:]
