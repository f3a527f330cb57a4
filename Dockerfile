# syntax=docker/dockerfile:1
# Fabric Planner image: one image for every role (web, worker, beat, migrate); the role is the command.
#   docker build -t fabric-planner:0.1.0 .
#   web (default CMD):  gunicorn planner.wsgi:application --bind 0.0.0.0:8000 --workers 3
#   worker:             celery -A planner worker -Q default,simulations -l INFO --concurrency 2
#   beat:               celery -A planner beat -l INFO --scheduler django_celery_beat.schedulers:DatabaseScheduler
#   migrate:            python manage.py migrate --noinput
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=planner.settings \
    DJANGO_ENV=production \
    PYTHONPATH=/app \
    FP_VAR_DIR=/app/var

WORKDIR /app

# A fixed, unprivileged uid/gid so Kubernetes can enforce runAsNonRoot with runAsUser 10001.
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --no-create-home --shell /usr/sbin/nologin app

# Dependencies first, from pyproject.toml. The project's own packages are installed too, but the
# source tree in /app is first on sys.path (PYTHONPATH, manage.py), so templates and static files
# are read from /app whatever setuptools' package-data picked up.
COPY pyproject.toml README.md* ./
COPY manage.py ./
COPY planner ./planner
COPY core ./core
COPY accounts ./accounts
COPY planning ./planning
COPY portal ./portal
COPY simulations ./simulations
COPY engine ./engine
RUN pip install .

# Static files are collected into the image (WhiteNoise serves them), in production mode so the
# hashed manifest is built. The key below exists only for this build step; it is not in the image env.
RUN DJANGO_ENV=production \
    SECRET_KEY=build-time-only-collectstatic-key-not-used-at-runtime-0123456789 \
    ALLOWED_HOSTS=localhost \
    python manage.py collectstatic --noinput \
    && mkdir -p /app/var \
    && chown -R app:app /app/var

USER 10001:10001

EXPOSE 8000

# Liveness of the web role. Django validates the Host header, so the probe sends the first entry
# of ALLOWED_HOSTS (a leading "." of a wildcard domain is dropped). Worker and beat containers
# started from this image override or disable this check (see docker-compose.yml).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as r; h = (os.environ.get('ALLOWED_HOSTS') or 'localhost').split(',')[0].strip().lstrip('.'); h = 'localhost' if h in ('', '*') else h; r.urlopen(r.Request('http://127.0.0.1:8000/healthz', headers={'Host': h}), timeout=4)"]

CMD ["gunicorn", "planner.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
