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

test: install
	$(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS)

test-unit: install
	$(PY) -m pytest -m "not integration and not browser" $(PYTEST_ARGS)

test-integration: install
	$(PY) -m pytest -m "integration" $(PYTEST_ARGS)

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
