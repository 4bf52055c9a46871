# make verify: set up .venv if needed, verify every bundled table, render its diagrams.
# make test:   lint, type-check and run the test suite.
# make bench:  speed and memory figures, as ratios to baselines measured in the same run; ends by
#               rendering the docs' marked figure blocks from bench/results/ (bench/figures.py).
# make pg-start / pg-stop: the private PostgreSQL server the shared-store tests use.
# make temporal-start / temporal-stop: the private Temporal dev server the Temporal tests use.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
TABLES := $(sort $(wildcard spec/*.yaml))
# Bundled systems: these verify; the durable protocol as it was must fail (its counterexamples are the defects).
SYSTEMS := spec/systems/loom-with-tools.yaml spec/systems/vibework-with-user.yaml spec/systems/durable-run-fixed.yaml \
           spec/systems/temporal-run.yaml
BROKEN_SYSTEMS := $(sort $(wildcard spec/systems/durable-run-as-it-was-*.yaml))
# The editable install links each module; a new module (or a changed pyproject) needs it re-run.
SOURCES := pyproject.toml $(sort $(wildcard agentfsm/*.py agentfsm/*/*.py spec/*.py spec/*.yaml spec/*.json spec/systems/*.yaml spec/systems/tables/*.yaml impl/*.py impl/*/*.py verify/*.py verify/*/*.py faults/*.py diagrams/*.py diagrams/*.js diagrams/*.css))
SETUP_HASH := $(shell echo "$(SOURCES)" | cat - pyproject.toml | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(SETUP_HASH)

.PHONY: setup check verify explore crash crash-agents test test-slow chaos mutation lint typecheck bench clean diagrams pg-start pg-stop report-screenshots temporal-start temporal-stop temporal-chaos

setup: $(STAMP)

$(STAMP):
	@rm -f $(VENV)/.installed-*
	./scripts/setup.sh
	@touch $@

check: setup
	@$(BIN)/agentfsm check $(TABLES) $(SYSTEMS) $(BROKEN_SYSTEMS)

verify: check explore diagrams crash crash-agents

# Exhaustive exploration and every named check of every bundled table and system.
explore: setup
	@$(BIN)/agentfsm verify --summary $(TABLES) $(SYSTEMS)
	@for s in $(BROKEN_SYSTEMS); do $(BIN)/agentfsm verify $$s > /dev/null; test $$? -eq 1 || \
	  { echo "$$s: expected its checks to fail"; exit 1; }; echo "$$s: fails, as the protocol as it was must"; done

# Pictures of every bundled table (diagrams/<machine>.svg and .mmd) and system (diagrams/systems/), checked fresh by the tests.
diagrams: setup
	@$(BIN)/agentfsm diagram $(TABLES) --out-dir diagrams
	@$(BIN)/agentfsm diagram $(SYSTEMS) $(BROKEN_SYSTEMS) --out-dir diagrams/systems

# Crash the durable runtime at every write boundary of every bundled table (a table without
# external actions is skipped with a note), with real SIGKILLs also during recovery. One table
# at a time, its scenarios shared by one forked process per CPU; one summary line per table.
crash: setup
	@status=0; for table in $(TABLES); do $(BIN)/agentfsm crash $$table --kill 8 || status=1; done; exit $$status

# Crash the agents themselves, not only their tables: each durable agent's demo is played by
# `agentfsm run --store` children SIGKILLed at write boundaries, resumed and compared.
AGENT_DEMOS := spec/loom-agent.yaml:examples/loom-demo.yaml spec/explorer-evaluator.yaml:examples/explorer-evaluator-agent.yaml \
               spec/tool-call.yaml:examples/tool-call-durable.yaml spec/vibework-agent.yaml:examples/vibework-agent-agent.yaml
crash-agents: setup
	@printf '%s\n' $(AGENT_DEMOS) | tr ':' ' ' | xargs -P 2 -L 1 sh -c '$(BIN)/agentfsm crash "$$0" --agent-script "$$1" --kill 1'

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(BIN)/mypy

# The suite on every CPU (pytest-xdist); PYTEST_JOBS=0 runs it in one process.
PYTEST_JOBS ?= auto
test: lint typecheck
	$(BIN)/pytest -n $(PYTEST_JOBS)

# The exhaustive runs kept out of make test (mutation score of every bundled table, the mutation
# run over the project's own code: docs/testing.md, ...), then
# the oracle tests again on fresh seeds (make test runs them derandomised; docs/testing.md).
test-slow: setup
	$(BIN)/pytest -m slow --durations=20
	$(BIN)/pytest --hypothesis-profile=fresh tests/verify/test_oracle.py

# Fault campaigns with real processes (two resumers, SIGKILL, SIGSTOP, full disk, bit flips,
# repair then resume, a mistyped run id, two resumers on PostgreSQL, tools outliving the lease,
# workers and the PostgreSQL server killed), at least 100 runs per store; also marked slow, so
# test-slow runs them too. See docs/durability.md.
chaos: setup
	$(BIN)/pytest -m chaos

# The whole mutation run over the project's own code, checked against the published one
# (tests/mutation_baseline.json); test-slow runs only the modules changed since then and a
# sample of the others. See docs/testing.md, "Mutation score".
mutation: setup
	$(BIN)/python tests/mutation_run.py --check

BENCHES := bench_startup bench_runtime bench_durable explore_vs_spin bench_systems system_levels_bench bench_postgres \
           bench_protocol_log chaos_audit bench_temporal bench_llm bench_conform protocol_walks bench_report bench_make_verify
# Every bench runs, and the docs' blocks are rendered, even when one misses its goal (its exit
# status is 1): the run then ends with status 1 and names the benches that missed.
bench: setup
	@missed=; for b in $(BENCHES); do $(BIN)/python bench/$$b.py || missed="$$missed $$b"; done; \
	  $(BIN)/python bench/figures.py || missed="$$missed figures"; \
	  if [ -n "$$missed" ]; then echo "bench: missed a goal or failed:$$missed" >&2; exit 1; fi

# The HTML report's screenshots in docs/report/ (docs/report.md), taken by its browser tests.
report-screenshots: setup
	AGENTFSM_REPORT_SCREENSHOTS=docs/report $(BIN)/pytest tests/diagrams/test_report_browser.py

# A private PostgreSQL cluster in .pg/ for the shared-store tests and benchmark (prints its URL).
pg-start:
	./scripts/postgres.sh start

pg-stop:
	./scripts/postgres.sh stop

# A private Temporal dev server in .temporal/ (SQLite-backed) for the Temporal tests (prints its address).
temporal-start: setup
	./scripts/temporal.sh start

temporal-stop:
	./scripts/temporal.sh stop

# The Temporal fault campaign (docs/temporal.md): 100 runs of the Loom table as workflows, 100 of the
# tool-call agent and 100 of the plain-activity baseline, real workers SIGKILLed and SIGSTOPped, the dev
# server killed and restarted; its counts are recorded and rendered into docs/temporal.md.
temporal-chaos: setup
	$(BIN)/python bench/temporal_chaos.py --runs 100 --batch 20
	$(BIN)/python bench/figures.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
