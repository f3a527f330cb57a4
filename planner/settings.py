"""Fabric Planner settings, read from the environment (12-factor, django-environ).

Modes
-----
* Embedded default (no variables): SQLite in ``var/``, an embedded Celery broker (kombu's SQLAlchemy
  transport on a SQLite file) and a worker process started beside the web server by ``make run``.
* Full mode: ``DATABASE_URL`` (PostgreSQL via psycopg 3) and ``REDIS_URL`` (Redis broker and result
  backend) with separate ``celery worker`` and ``celery beat`` processes.
* ``DJANGO_ENV=production``: DEBUG off, SECRET_KEY and ALLOWED_HOSTS required, secure cookies, HSTS,
  JSON logs. ``manage.py check --deploy`` is clean in this mode.

Every variable is documented in ``.env.example``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FP_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)



class Env(environ.Env):
    """django-environ's typed getters (``env.bool``, ``env.int``, ``env.float``, ``env.str``), made strict: a
    malformed value stops the start with an error naming the variable (never a silent False), and an empty
    variable counts as unset."""

    BOOLEAN_FALSE_STRINGS = ("false", "off", "no", "n", "0")

    def get_value(self, var: str, cast: Any = None, default: Any = environ.Env.NOTSET, parse_default: bool = False) -> Any:
        raw = self.ENVIRON.get(var)
        if raw is not None and raw.strip() == "" and default is not environ.Env.NOTSET:
            return default
        if cast is bool and raw is not None:
            words = raw.strip().lower()
            if words not in self.BOOLEAN_TRUE_STRINGS and words not in self.BOOLEAN_FALSE_STRINGS:
                raise ImproperlyConfigured(f"{var}: expected a boolean (true/false/1/0), got {raw!r}")
        try:
            return super().get_value(var, cast=cast, default=default, parse_default=parse_default)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(cast, "a valid value")
            raise ImproperlyConfigured(f"{var}: expected {kind}, got {raw!r}") from None


env = Env()

DJANGO_ENV = env.str("DJANGO_ENV", default="development")
if DJANGO_ENV not in ("development", "production", "test"):
    raise ImproperlyConfigured(f"DJANGO_ENV: must be development, production or test, not {DJANGO_ENV!r}")
PRODUCTION = DJANGO_ENV == "production"


# --- Core -------------------------------------------------------------------------------------------
if PRODUCTION:
    SECRET_KEY = env.str("SECRET_KEY", default="")
    if len(SECRET_KEY) < 50:
        raise ImproperlyConfigured(
            "SECRET_KEY: required in production (DJANGO_ENV=production), at least 50 random characters"
        )
else:
    SECRET_KEY = env.str("SECRET_KEY", default="") or "dev-insecure-" + "x" * 50

DEBUG = env.bool("DEBUG", default=not PRODUCTION)
_hosts = env.str("ALLOWED_HOSTS", default="")
if PRODUCTION and not _hosts:
    raise ImproperlyConfigured("ALLOWED_HOSTS: required in production (comma-separated host names)")
ALLOWED_HOSTS = [h.strip() for h in _hosts.split(",") if h.strip()] or ["127.0.0.1", "localhost", "testserver"]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env.str("CSRF_TRUSTED_ORIGINS", default="").split(",") if o.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "django_tables2",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django_htmx",
    "csp",
    "accounts",
    "planning",
    "simulations",
    "portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "planner.middleware.RequestIdMiddleware",
    "planner.middleware.DatabaseRetryMiddleware",  # a dropped connection: a GET is retried once, never a 500
    "planner.middleware.WorkBudgetMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "portal.middleware.DomainErrorMiddleware",
]

ROOT_URLCONF = "planner.urls"
WSGI_APPLICATION = "planner.wsgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "planner" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.teams",
            ],
        },
    }
]

# --- Database -----------------------------------------------------------------------------------------
if os.environ.get("DATABASE_URL"):
    try:
        _db: dict[str, Any] = env.db_url("DATABASE_URL")
    except Exception as exc:  # django-environ raises several types for malformed URLs
        raise ImproperlyConfigured(f"DATABASE_URL: malformed database URL ({exc})") from None
    _scheme = os.environ["DATABASE_URL"].split("://", 1)[0] if "://" in os.environ["DATABASE_URL"] else ""
    if not _db.get("ENGINE") or _scheme not in environ.Env.DB_SCHEMES:
        raise ImproperlyConfigured(
            f"DATABASE_URL: unsupported scheme {_scheme!r} (use postgres://user@host:port/name)"
        )
    _db.setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    _db["CONN_HEALTH_CHECKS"] = True
    DATABASES = {"default": _db}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "fabric-planner.sqlite3",
            # WAL + a busy timeout let the web process and the embedded worker share the file.
            "OPTIONS": {"timeout": 30, "init_command": "PRAGMA journal_mode=WAL;"},
            "TEST": {"NAME": VAR_DIR / "test-fabric-planner.sqlite3"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache (rate limits, locks) ----------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured("REDIS_URL: must start with redis://, rediss:// or unix://")
if REDIS_URL:
    # The key prefix keeps cache keys (rate limits, locks) apart from the Celery queues in the same DB.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "fpcache",
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "fp_cache",
            # rate-limit slots and idempotency keys live here: never cull live entries (Django culls at 300)
            "OPTIONS": {"MAX_ENTRIES": 1_000_000},
        }
    }

# --- Celery -------------------------------------------------------------------------------------------
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    BROKER_KIND = "redis"
else:
    CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}"
    CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or f"db+sqlite:///{VAR_DIR / 'celery-results.sqlite3'}"
    BROKER_KIND = "embedded"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=900)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=840)
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
if REDIS_URL:
    # With acks_late, a message not acked within the visibility timeout is redelivered (Redis transport).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600)}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = "UTC"

# --- I18N / static ------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE

# --- REST framework -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        "core.api.renderers.SafeJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.SafeJSONParser",
        "core.api.parsers.SafeFormParser",
        "core.api.parsers.SafeMultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 25,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
        "rest_framework.filters.SearchFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    "DEFAULT_THROTTLE_RATES": {
        "token": env.str("THROTTLE_TOKEN", default="20/min"),
    },
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Fabric Planner API",
    "DESCRIPTION": (
        "Capacity planning for AI GPU clusters: step time, MFU, goodput and total cost of ownership. "
        'Errors share one body: {"errors": {"<field>": ["<message>"]}, "status": <code>}.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI served from our own static files (drf-spectacular-sidecar): works offline, CSP 'self'.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v[0-9]",
    "ENUM_NAME_OVERRIDES": {
        "CatalogItemKindEnum": "planning.models.CATALOG_KIND_CHOICES",
        "RunKindEnum": "simulations.models.RunKind",
        "RunOrJobKindEnum": "simulations.models.KIND_CHOICES",  # a run's kind: RunKind + JobKind (issue #23)
        "RunEventKindEnum": "simulations.models.RunEvent.Kind",  # what happened to a run (its events)
        "CalibrationFileKindEnum": "planning.services.calibration.KINDS",  # nccl-tests, step-log, telemetry
    },
}

# --- Security -----------------------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# --- Logging (JSON in production) ---------------------------------------------------------------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO").upper()
LOG_JSON = env.bool("LOG_JSON", default=PRODUCTION)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "planner.middleware.RequestIdLogFilter"}},
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
        },
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_JSON else "plain",
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- Fabric Planner -----------------------------------------------------------------------------------
FP_DEMO_PASSWORD = env.str("FP_DEMO_PASSWORD", default="fabric-demo-2026")
# Run leases (simulations/limits.py checks them at start-up; docs/operations.md "leases and recovery"): a running
# execution renews its lease from a heartbeat thread every FP_RUN_HEARTBEAT_S (<= lease / 3); a run whose lease
# lapsed (dead worker) is re-claimed by a redelivered message or re-queued by the reaper (beat, every
# FP_REAPER_EVERY_S); a queued run older than FP_RUN_REDISPATCH_AFTER_S is re-sent when the broker lost messages,
# and one older than FP_RUN_STUCK_AFTER_S whatever the broker says.
FP_RUN_LEASE_S = env.int("FP_RUN_LEASE_S", default=30)
FP_RUN_HEARTBEAT_S = env.float("FP_RUN_HEARTBEAT_S", default=0.0) or FP_RUN_LEASE_S / 3
FP_RUN_REDISPATCH_AFTER_S = env.int("FP_RUN_REDISPATCH_AFTER_S", default=45)
FP_RUN_STUCK_AFTER_S = env.int("FP_RUN_STUCK_AFTER_S", default=900)
FP_REAPER_EVERY_S = env.int("FP_REAPER_EVERY_S", default=15)
# Time limits (simulations/limits.py checks them at start-up; docs/security.md "time budgets")
FP_WEB_TIMEOUT_S = env.int("FP_WEB_TIMEOUT_S", default=30)  # gunicorn --timeout (its default)
FP_WEB_ENGINE_BUDGET_S = env.float("FP_WEB_ENGINE_BUDGET_S", default=5.0)  # engine work per web request
FP_RUN_SOFT_TIME_LIMIT_S = env.int("FP_RUN_SOFT_TIME_LIMIT_S", default=300)  # Celery soft limit of one run
FP_RUN_TIME_LIMIT_S = env.int("FP_RUN_TIME_LIMIT_S", default=330)  # Celery hard limit of one run
FP_RUN_BUDGET_S = env.float("FP_RUN_BUDGET_S", default=0.0) or (  # the run's cooperative budget
    FP_RUN_SOFT_TIME_LIMIT_S - min(30, FP_RUN_SOFT_TIME_LIMIT_S / 4))
FP_MAX_SWEEP_RUNS = env.int("FP_MAX_SWEEP_RUNS", default=512)  # child runs of a sweep or a replication request
# Admission (simulations/limits.py, docs/security.md "Admission"): a run whose estimated peak memory exceeds
# FP_RUN_MAX_MEMORY_MB (or whose estimated time exceeds FP_RUN_BUDGET_S) is refused at submit time; a team may hold
# FP_TEAM_MAX_ACTIVE_RUNS queued or running runs (more answers 429, Retry-After FP_ADMISSION_RETRY_AFTER_S);
# an Idempotency-Key of a sweep or replication request is remembered FP_IDEMPOTENCY_TTL_S.
FP_RUN_MAX_MEMORY_MB = env.int("FP_RUN_MAX_MEMORY_MB", default=2048)
FP_TEAM_MAX_ACTIVE_RUNS = env.int("FP_TEAM_MAX_ACTIVE_RUNS", default=512)
FP_ADMISSION_RETRY_AFTER_S = env.int("FP_ADMISSION_RETRY_AFTER_S", default=60)
FP_IDEMPOTENCY_TTL_S = env.int("FP_IDEMPOTENCY_TTL_S", default=86400)
# Team webhooks may target private/loopback addresses only outside production (local receivers in dev/tests).
FP_WEBHOOK_ALLOW_PRIVATE = env.bool("FP_WEBHOOK_ALLOW_PRIVATE", default=not PRODUCTION)
