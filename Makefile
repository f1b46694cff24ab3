# Developer entry points. A fresh machine needs Python 3.11+ and the PostgreSQL
# server binaries; `make demo` and `make test` do the rest. `make test` also needs
# Chromium, its chromedriver and PgBouncer (the admin's browser test, the PgBouncer
# tests): run as root or with passwordless sudo it installs the missing ones with
# apt-get (scripts/ensure_test_tools.sh); otherwise it stops at once, naming them.
#
#   make test                       run the test suite on a throwaway Postgres
#   make test PYTEST_ARGS='-k foo'  ... with extra pytest arguments
#   make demo                       run the awa_demo management command
#   make lint                       ruff check
#   make typecheck                  mypy on awa_django/ and the typed-API usage checks
#   make bench                      awa_django vs awa-pg, procrastinate, pgqueuer on a
#                                   throwaway Postgres, then charts (docs/benchmarks.md)
#   make bench BENCH_ARGS='--jobs 2000 --reps 1 --soak-seconds 60'   ... a quick run
#   make bench BENCH_ARGS='--systems awa_django django_tasks_db --workloads tasks --jobs 4000'
#                                   ... django.tasks tasks on awa_django and django-tasks-db
#   make bench-web                  web-shaped producers: concurrent requests that enqueue
#                                   in their transaction, awa_django vs django-tasks-db,
#                                   procrastinate, pgqueuer and no queue at all
#   make bench-web WEB_ARGS='--threads 32 --work-ms 5 --reps 1'   ... one cell
#   make bench-awa                  awa_django-only benchmark with hot-path statistics
#   make bench-pinned               10-minute bloat run under a pinned MVCC horizon
#
# Set DATABASE_URL to use an existing database instead of a throwaway one.
# Test another interpreter / Django without touching the default venv:
#   make test PYTHON=python3.12 VENV=.venv-py312 DJANGO_SPEC='Django>=6,<7'

PYTHON ?= python3
VENV ?= .venv
DJANGO_SPEC ?=
PYTEST_ARGS ?=
BENCH_ARGS ?=

VENV_PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The venv's Python is 3.11+ (pip enforces requires-python), which the
# helper script needs; the system python3 might be older.
WITH_POSTGRES := $(VENV_PYTHON) scripts/with_postgres.py --

.PHONY: help venv test demo lint FORCE

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

venv: $(STAMP)

# The stamp records DJANGO_SPEC and the package version, so changing either reinstalls even
# when pyproject.toml is unchanged (the editable install's metadata carries the version).
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' awa_django/__init__.py)
ifneq ($(file <$(STAMP)),spec=$(DJANGO_SPEC) version=$(VERSION))
$(STAMP): FORCE
endif

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip install -e '.[dev,bench]'
	$(if $(DJANGO_SPEC),$(VENV_PYTHON) -m pip install '$(DJANGO_SPEC)')
	printf 'spec=%s version=%s\n' '$(DJANGO_SPEC)' '$(VERSION)' > $@

# Before the virtualenv, so a machine that lacks a tool hears it at once.
# Two servers: the tests of queues in another database need a second one (DATABASE_URL_2).
test: test-tools $(STAMP)
	$(VENV_PYTHON) scripts/with_postgres.py --second -- $(VENV_PYTHON) -m pytest $(PYTEST_ARGS)

.PHONY: test-tools
test-tools:
	@bash scripts/ensure_test_tools.sh

demo: $(STAMP)
	$(WITH_POSTGRES) $(VENV_PYTHON) manage.py awa_demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

.PHONY: typecheck

typecheck: $(STAMP)
	$(VENV)/bin/mypy awa_django tests/typecheck

FORCE:

.PHONY: bench bench-awa
BENCH_OUT ?= benchmarks/results/sbs-$(shell date -u +%Y%m%dT%H%M%SZ).json
BENCH_AWA_ARGS ?=

# The side-by-side run uses a durable throwaway server (WAL flushed at every commit), as a
# production server is; the test suite's server has durability off. Ignored when DATABASE_URL
# names a server.
BENCH_SERVER_OPTIONS ?= -c fsync=on -c synchronous_commit=on -c full_page_writes=on

bench: $(STAMP)
	WITH_POSTGRES_OPTIONS='$(BENCH_SERVER_OPTIONS)' $(WITH_POSTGRES) $(VENV_PYTHON) -m benchmarks.sidebyside $(BENCH_ARGS) --output $(BENCH_OUT)
	$(VENV_PYTHON) -m benchmarks.sidebyside.plot $(BENCH_OUT)

.PHONY: bench-web
WEB_ARGS ?=
WEB_OUT ?= benchmarks/results/web-$(shell date -u +%Y%m%dT%H%M%SZ).json

bench-web: $(STAMP)
	WITH_POSTGRES_OPTIONS='$(BENCH_SERVER_OPTIONS)' $(WITH_POSTGRES) $(VENV_PYTHON) -m benchmarks.web $(WEB_ARGS) --output $(WEB_OUT)

bench-awa: $(STAMP)
	$(WITH_POSTGRES) $(VENV_PYTHON) -m benchmarks.run $(BENCH_AWA_ARGS)

.PHONY: bench-pinned
PINNED_ARGS ?=
bench-pinned: $(STAMP)
	$(WITH_POSTGRES) $(VENV_PYTHON) -m benchmarks.pinned_horizon $(PINNED_ARGS)
