# make verify: set up .venv if needed, verify every bundled table, render its diagrams.
# make test:   lint, type-check and run the test suite.
# make bench:  speed and memory figures, as ratios to baselines measured in the same run.
# make pg-start / pg-stop: the private PostgreSQL server the shared-store tests use.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
TABLES := $(sort $(wildcard spec/*.yaml))
# The editable install links each module; a new module (or a changed pyproject) needs it re-run.
SOURCES := pyproject.toml $(sort $(wildcard agentfsm/*.py spec/*.py spec/*.yaml spec/*.json impl/*.py impl/*/*.py verify/*.py diagrams/*.py))
SETUP_HASH := $(shell echo "$(SOURCES)" | cat - pyproject.toml | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(SETUP_HASH)

.PHONY: setup check verify explore crash test test-slow lint typecheck bench clean diagrams pg-start pg-stop

setup: $(STAMP)

$(STAMP):
	@rm -f $(VENV)/.installed-*
	./scripts/setup.sh
	@touch $@

check: setup
	$(BIN)/agentfsm check $(TABLES)

verify: check explore diagrams crash

# Exhaustive exploration and every named check of every bundled table.
explore: setup
	$(BIN)/agentfsm verify $(TABLES)

# Pictures of every bundled table: diagrams/<machine>.svg and .mmd (checked fresh by the tests).
diagrams: setup
	$(BIN)/agentfsm diagram $(TABLES) --out-dir diagrams

# Crash the durable runtime at every write boundary of every bundled table (a table without
# external actions is skipped with a note), with real SIGKILLs also during recovery.
crash: setup
	@printf '%s\n' $(TABLES) | xargs -P 2 -I TABLE $(BIN)/agentfsm crash TABLE --kill 8

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

# The exhaustive runs kept out of make test (mutation score of every bundled table, ...), then
# the oracle tests again on fresh seeds (make test runs them derandomised; docs/testing.md).
test-slow: setup
	$(BIN)/pytest -m slow
	$(BIN)/pytest --hypothesis-profile=fresh tests/test_oracle.py

bench: setup
	$(BIN)/python bench/bench_runtime.py
	$(BIN)/python bench/bench_durable.py
	$(BIN)/python bench/explore_vs_spin.py
	$(BIN)/python bench/bench_postgres.py

# A private PostgreSQL cluster in .pg/ for the shared-store tests and benchmark (prints its URL).
pg-start:
	./scripts/postgres.sh start

pg-stop:
	./scripts/postgres.sh stop

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
