# The two commands a newcomer needs: `make demo` and `make test`. Both set up .venv themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# What is installed into .venv, in two steps: `make demo` only what the product and the demo
# need (the spark extra, and mypyc for `make native`); `make test` and the other developer
# targets add the test and lint tools (the dev extra).
DEMO_STAMP := $(VENV)/.installed-demo
DEV_STAMP := $(VENV)/.installed-dev
NATIVE := $(VENV)/.native
PYTEST_ARGS ?=

.PHONY: all venv venv-demo native clean-native system-deps demo lint format test test-fast \
	test-sqlalchemy test-sqlalchemy-async test-pymysql test-pymysql-proxy bench clean

all: test

$(DEMO_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[spark,native]'
	@touch $(DEMO_STAMP)

$(DEV_STAMP): $(DEMO_STAMP)
	@bash scripts/ensure-system-packages.sh --clients
	$(PY) -m pip install --quiet -e '.[dev,spark,native]'
	@touch $(DEV_STAMP)

venv-demo: $(DEMO_STAMP)

venv: $(DEV_STAMP)

# The per-statement path (routing policy, proxy) compiled to C extensions with mypyc
# (consistent/native.py lists the modules); rebuilt whenever one of their packages' sources
# changes.  `make clean-native` runs everything from source.
$(NATIVE): $(DEMO_STAMP) $(wildcard proxy/*.py consistent/policy/*.py) consistent/native.py \
		$(wildcard consistent/emulator/*.py consistent/emulator/sql/*.py consistent/emulator/wire/*.py) \
		scripts/compile.py
	@bash scripts/ensure-system-packages.sh --compiler
	$(PY) scripts/compile.py
	@touch $(NATIVE)

native: $(NATIVE)

clean-native:
	@test ! -x $(PY) || $(PY) scripts/compile.py --clean
	rm -f $(NATIVE)

# Real servers the suite runs against, from Debian's packages (we run as root on CI).
system-deps:
	@bash scripts/ensure-system-packages.sh

# The whole product on the embedded emulator: topology, proxy, workload, staleness report.
demo: venv-demo native
	@bash scripts/ensure-system-packages.sh --java
	$(VENV)/bin/consistent demo $(DEMO_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: venv system-deps native lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Pure tests only: no real servers.
test-fast: venv native
	$(VENV)/bin/pytest -m "not mariadb" $(PYTEST_ARGS)

# SQLAlchemy's dialect compliance suite on real MariaDB, mysql+consistent beside mysql+pymysql.
test-sqlalchemy: venv system-deps native
	$(PY) tests/sqlalchemy_compliance/run.py

# The same with the asyncio pair: mysql+consistent_async against mysql+aiomysql.
test-sqlalchemy-async: venv system-deps native
	$(PY) tests/sqlalchemy_compliance/run.py --form async

# PyMySQL's own test suite on real MariaDB, directly and through consistent.connect (the suite is
# downloaded from PyPI); fails on a test that passes directly only, unless README.md lists it.
test-pymysql: venv system-deps native
	$(PY) tests/pymysql_suite/run.py

# The same suite through the proxy, multiplexing on and off, beside a direct run.
test-pymysql-proxy: venv system-deps native
	$(PY) tests/pymysql_suite/run.py --proxy

# Every bench/ script: out/bench/results.json plus one table (about 15-20 min on 2 cores).
# BENCH_ARGS=--full for the issues' full sizes; BENCH_ARGS="--only gtid classify" for a subset.
BENCH_ARGS ?=
bench: venv system-deps native
	$(PY) bench/suite.py $(BENCH_ARGS)

clean: clean-native
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
