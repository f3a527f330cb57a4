# Fabric Planner — developer commands. `make run` and `make test` work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install run setup test test-unit test-integration lint bench fuzz validation clean fabric-tables

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

setup: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py createcachetable
	$(PY) manage.py load_default_catalog
	$(PY) manage.py seed_schedules
	$(PY) manage.py seed_demo

run: setup
	$(PY) -m planner.devserver

# `make test` is the whole suite: unit, integration and browser tests. Without DATABASE_URL/REDIS_URL it first makes
# sure PostgreSQL and Redis answer on 127.0.0.1 (scripts/services.sh starts them when installed but stopped, as
# .ci/run does; it never installs) and uses them. When they cannot run, those tests skip and the last line of the
# summary says how many and the one command that runs them (bash .ci/run). .ci/run sets both variables itself.
FP_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/fabric_planner
FP_TEST_REDIS_URL ?= redis://127.0.0.1:6379/1
WITH_SERVICES = if [ -z "$${DATABASE_URL:-}" ] || [ -z "$${REDIS_URL:-}" ]; then \
	  if bash scripts/services.sh; then \
	    export DATABASE_URL="$${DATABASE_URL:-$(FP_TEST_DATABASE_URL)}" REDIS_URL="$${REDIS_URL:-$(FP_TEST_REDIS_URL)}"; \
	    echo "make: integration and browser tests on PostgreSQL + Redis (DATABASE_URL=$$DATABASE_URL REDIS_URL=$$REDIS_URL)"; \
	  fi; \
	fi

test: install
	@$(WITH_SERVICES); $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS)

test-unit: install
	$(PY) -m pytest -m "not integration and not browser" $(PYTEST_ARGS)

test-integration: install
	@$(WITH_SERVICES); $(PY) -m pytest -m "integration" $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy planner core accounts planning simulations portal
	$(VENV)/bin/lint-imports

bench: install
	$(PY) benchmarks/run_all.py

fuzz: install
	bash scripts/fuzz.sh

validation: install
	$(PY) manage.py validation_report

# Simulated routing/congestion tables read by the performance model (flow-level simulator, issue #13)
fabric-tables: install
	$(PY) scripts/fabric_tables.py

clean:
	rm -rf var test-artifacts .pytest_cache .mypy_cache .ruff_cache
