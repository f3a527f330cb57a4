"""docker-compose.yml, Dockerfile, .dockerignore and .env.example.

The compose file is validated against the Compose Specification schema shipped in
tests/data/compose-spec.json (no network at test time), then cross-checked: dependencies and their
conditions, health checks, the commands each service runs, and the variables it references.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy import (
    PYTHON,
    ROOT,
    SETTINGS_VARS,
    as_argv,
    celery_commands,
    clean_env,
    command_problems,
    documented_vars,
    env_example_values,
    run_celery_help,
    split_shell,
)

COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = ROOT / "tests" / "data" / "compose-spec.json"
APP_SERVICES = ("web", "worker", "beat", "migrate")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _errors(validator: jsonschema.protocols.Validator, doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


# --- schema ---------------------------------------------------------------------------------------
def test_schema_file_names_its_source() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    assert "compose-spec" in schema["$comment"]
    assert schema["title"] == "Compose Specification"
    assert "service" in schema["definitions"]


def test_compose_file_matches_compose_spec(compose: dict[str, Any], validator: Any) -> None:
    assert _errors(validator, compose) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("services", "web", "helthcheck"), {"test": ["CMD", "true"]}),
        (("services", "web", "depends_on", "migrate", "condition"), "service_finished"),
        (("services", "postgres", "healthcheck", "interval"), 5),
        (("volumez",), {}),
    ],
)
def test_schema_rejects_broken_variants(
    compose: dict[str, Any], validator: Any, path: tuple[str, ...], value: Any
) -> None:
    """The validation above can fail: typos and wrong types are caught by the shipped schema."""
    doc = copy.deepcopy(compose)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert _errors(validator, doc)


# --- services, dependencies, health -------------------------------------------------------------------
def test_expected_services(compose: dict[str, Any]) -> None:
    assert set(_services(compose)) >= {"web", "worker", "beat", "migrate", "postgres", "redis"}


def test_datastores(compose: dict[str, Any]) -> None:
    services = _services(compose)
    pg, redis = services["postgres"], services["redis"]
    assert re.fullmatch(r"postgres:16([.\-].*)?", pg["image"]), pg["image"]
    assert re.fullmatch(r"redis:7([.\-].*)?", redis["image"]), redis["image"]
    assert "pg_isready" in " ".join(as_argv(pg["healthcheck"]["test"]))
    assert as_argv(redis["healthcheck"]["test"])[-2:] == ["redis-cli", "ping"]
    # PostgreSQL data survives `docker compose down` in a declared named volume.
    named = {v.split(":", 1)[0] for v in pg["volumes"] if isinstance(v, str)}
    targets = {v.split(":", 2)[1] for v in pg["volumes"] if isinstance(v, str)}
    assert "/var/lib/postgresql/data" in targets
    assert named & set(compose.get("volumes") or {}), "postgres data must use a top-level named volume"


def test_dependencies_exist_and_conditions_are_meaningful(compose: dict[str, Any]) -> None:
    services = _services(compose)
    for name, svc in services.items():
        deps = svc.get("depends_on") or {}
        assert isinstance(deps, dict), f"{name}: use depends_on with conditions"
        for dep, spec in deps.items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            condition = spec["condition"]
            if condition == "service_healthy":
                hc = services[dep].get("healthcheck") or {}
                assert hc.get("test") and not hc.get("disable"), f"{dep} has no health check to wait on"
            if condition == "service_completed_successfully":
                assert services[dep].get("restart", "no") == "no", f"{dep} is one-shot: restart must be 'no'"


@pytest.mark.parametrize("name", ["web", "worker", "beat"])
def test_app_services_wait_for_migrate_and_datastores(compose: dict[str, Any], name: str) -> None:
    deps = _services(compose)[name]["depends_on"]
    assert deps["migrate"]["condition"] == "service_completed_successfully"
    assert deps["postgres"]["condition"] == "service_healthy"
    assert deps["redis"]["condition"] == "service_healthy"


def test_migrate_waits_for_database(compose: dict[str, Any]) -> None:
    deps = _services(compose)["migrate"]["depends_on"]
    assert deps["postgres"]["condition"] == "service_healthy"


def test_web_and_worker_health_checks(compose: dict[str, Any]) -> None:
    services = _services(compose)
    web = " ".join(as_argv(services["web"]["healthcheck"]["test"]))
    assert "/healthz" in web and "8000" in web
    worker = " ".join(as_argv(services["worker"]["healthcheck"]["test"]))
    assert "inspect ping" in worker and "-A planner" in worker
    # "$$HOSTNAME" reaches the container shell as $HOSTNAME; a single "$" would be interpolated by compose.
    assert "$$HOSTNAME" in worker
    for name in ("beat", "migrate"):
        # The image's HEALTHCHECK probes HTTP :8000, which only web serves.
        assert services[name]["healthcheck"].get("disable") is True, name


# --- commands -----------------------------------------------------------------------------------------
def test_service_commands(compose: dict[str, Any]) -> None:
    services = _services(compose)
    assert as_argv(services["web"]["command"]) == [
        "gunicorn",
        "planner.wsgi:application",
        "--bind",
        "0.0.0.0:8000",
        "--workers",
        "3",
    ]
    assert as_argv(services["worker"]["command"]) == [
        "celery",
        "-A",
        "planner",
        "worker",
        "-Q",
        "default,simulations",
        "-l",
        "INFO",
        "--concurrency",
        "2",
    ]
    beat = as_argv(services["beat"]["command"])
    assert beat[:4] == ["celery", "-A", "planner", "beat"]
    assert "django_celery_beat.schedulers:DatabaseScheduler" in beat
    steps = [" ".join(argv) for argv in split_shell(as_argv(services["migrate"]["command"]))]
    assert steps == [
        "python manage.py migrate --noinput",
        "python manage.py load_default_catalog",
        "python manage.py collectstatic --noinput",
    ]


@pytest.mark.parametrize("name", APP_SERVICES)
def test_service_command_targets_exist(compose: dict[str, Any], name: str) -> None:
    svc = _services(compose)[name]
    commands = [svc["command"]]
    hc = svc.get("healthcheck") or {}
    if hc.get("test") and not hc.get("disable"):
        test = as_argv(hc["test"])
        if test[0] == "CMD-SHELL":
            commands.append(["sh", "-c", test[1]])
        elif test[0] == "CMD":
            commands.append(test[1:])
    for command in commands:
        assert command_problems(command) == [], command


def test_wsgi_application_importable() -> None:
    import importlib

    module = importlib.import_module("planner.wsgi")
    assert callable(module.application)


def test_gunicorn_loads_the_application() -> None:
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "gunicorn",
            "--check-config",
            "planner.wsgi:application",
            "--bind",
            "0.0.0.0:8000",
            "--workers",
            "3",
        ],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_celery_app_loads() -> None:
    for args in (["inspect", "--help"], ["report"]):
        proc = subprocess.run(
            [PYTHON, "-m", "celery", "-A", "planner", *args],
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (args, proc.stderr[-3000:])
    assert "software -> celery" in proc.stdout


def test_celery_tasks_registered() -> None:
    script = (
        "import django; django.setup()\n"
        "from planner.celery import app\n"
        "app.loader.import_default_modules()\n"
        "print('\\n'.join(sorted(app.tasks)))\n"
    )
    proc = subprocess.run(
        [PYTHON, "-c", script], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "planner.ping" in proc.stdout.split()


def test_compose_celery_command_lines_parse(compose: dict[str, Any]) -> None:
    services = _services(compose)
    commands: list[Any] = [services[name]["command"] for name in APP_SERVICES]
    commands.append(["sh", "-c", as_argv(services["worker"]["healthcheck"]["test"])[1]])
    found = celery_commands(commands)
    assert len(found) >= 3  # worker, beat, inspect ping
    for argv in sorted(found):
        proc = run_celery_help(argv)
        assert proc.returncode == 0, (argv, proc.stderr[-2000:])


# --- environment ---------------------------------------------------------------------------------------
def test_app_services_read_env_file(compose: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        env_file = _services(compose)[name]["env_file"]
        assert env_file == ".env" or env_file == [".env"], name
    assert (ROOT / ".env.example").is_file()


def test_env_example_documents_every_settings_variable() -> None:
    documented = documented_vars()
    missing = [v for v in SETTINGS_VARS if v not in documented]
    assert missing == []
    unexplained = [v for v, has_comment in documented.items() if not has_comment]
    assert unexplained == [], "each variable needs a comment above it"


def test_settings_reads_only_documented_variables() -> None:
    """Cross-check planner/settings.py itself: any variable it reads must be in .env.example."""
    source = (ROOT / "planner" / "settings.py").read_text()
    pattern = r"""(?:environ\.get|environ\[|_bool|_int|env\.\w+)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
    read = set(re.findall(pattern, source)) | set(
        re.findall(r"""os\.environ\[["']([A-Z][A-Z0-9_]+)["']\]""", source)
    )
    read.discard("DJANGO_SETTINGS_MODULE")
    assert read, "no variables found: the pattern no longer matches settings.py"
    assert sorted(read - set(documented_vars())) == []


def test_compose_interpolations_are_documented() -> None:
    text = COMPOSE_FILE.read_text()
    # ${NAME}, ${NAME:-default}, ${NAME:?error}; "$$" escapes are for the container shell.
    names = set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    names |= set(re.findall(r"(?<!\$)\$([A-Za-z_][A-Za-z0-9_]*)", text))
    assert names, "expected at least the POSTGRES_* interpolations"
    assert sorted(names - set(documented_vars())) == []


def test_compose_environment_keys_are_documented(compose: dict[str, Any]) -> None:
    documented = set(documented_vars())
    for name, svc in _services(compose).items():
        env = svc.get("environment") or {}
        keys = set(env) if isinstance(env, dict) else {item.split("=", 1)[0] for item in env}
        assert sorted(keys - documented) == [], name


def test_env_example_urls_point_at_compose_services(compose: dict[str, Any]) -> None:
    values = env_example_values()
    services = _services(compose)
    db = re.fullmatch(r"postgres(?:ql)?://([^:]+):([^@]+)@([^:/]+):(\d+)/(\w+)", values["DATABASE_URL"])
    assert db, values["DATABASE_URL"]
    user, password, host, port, name = db.groups()
    assert host in services and port == "5432"
    assert (user, password, name) == (
        values["POSTGRES_USER"],
        values["POSTGRES_PASSWORD"],
        values["POSTGRES_DB"],
    )
    redis = re.fullmatch(r"redis://([^:/]+):(\d+)/\d+", values["REDIS_URL"])
    assert redis and redis.group(1) in services and redis.group(2) == "6379"
    assert values["DJANGO_ENV"] in ("development", "production", "test")
    assert len(values["SECRET_KEY"]) >= 50
    # The web health check sends the first ALLOWED_HOSTS entry as Host: it must be a local name.
    assert values["ALLOWED_HOSTS"].split(",")[0] in ("localhost", "127.0.0.1")


# --- Dockerfile ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    """Instructions with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _instr(lines: list[str], keyword: str) -> list[str]:
    return [ln.split(None, 1)[1] for ln in lines if ln.split(None, 1)[0].upper() == keyword]


def test_dockerfile_base_user_port(dockerfile: list[str]) -> None:
    assert _instr(dockerfile, "FROM")[-1].split()[0] == "python:3.11-slim"
    user = _instr(dockerfile, "USER")[-1].split(":")[0]
    assert user not in ("root", "0"), user
    assert "8000" in " ".join(_instr(dockerfile, "EXPOSE"))


def test_dockerfile_installs_project_and_collects_static(dockerfile: list[str]) -> None:
    runs = _instr(dockerfile, "RUN")
    assert any(re.search(r"pip install (--\S+ )*\.(\s|$)", r) for r in runs)
    collect = [r for r in runs if "collectstatic --noinput" in r]
    assert collect, "collectstatic must run at build time"
    assert "DJANGO_ENV=production" in collect[0]
    key = re.search(r"SECRET_KEY=(\S+)", collect[0])
    assert key and len(key.group(1)) >= 50, "the build-time SECRET_KEY must satisfy production's 50-char rule"
    assert not any("SECRET_KEY" in e for e in _instr(dockerfile, "ENV")), "no SECRET_KEY baked into the image"


def test_dockerfile_healthcheck_and_cmd(dockerfile: list[str]) -> None:
    health = _instr(dockerfile, "HEALTHCHECK")
    assert health and "/healthz" in health[0]
    cmd = json.loads(_instr(dockerfile, "CMD")[-1])
    assert cmd == ["gunicorn", "planner.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]


def test_dockerfile_copies_what_the_project_needs(dockerfile: list[str]) -> None:
    copied = " ".join(_instr(dockerfile, "COPY"))
    for item in ("pyproject.toml", "manage.py", "planner", "accounts", "simulations"):
        assert re.search(rf"(^|\s){re.escape(item)}(\s|$)", copied), item
    # Every top-level package setuptools is told to find must be copied, or `pip install .` misses it.
    pyproject = (ROOT / "pyproject.toml").read_text()
    include = re.search(r"include\s*=\s*\[([^\]]*)\]", pyproject)
    assert include
    for pkg in re.findall(r'"(\w+)\*?"', include.group(1)):
        assert re.search(rf"(^|\s){pkg}(\s|$)", copied), pkg


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    entries = {
        ln.strip()
        for ln in (ROOT / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    }
    assert {".git", ".venv", ".env", "var"} <= entries
    copied_dirs = {"planner", "accounts", "simulations"}
    assert not (entries & copied_dirs | {e for e in entries if e in ("manage.py", "pyproject.toml")})
