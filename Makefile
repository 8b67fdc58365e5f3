# The two commands: `make run` and `make test`. Everything they need, they install or start.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: the package alone (`make run`), then the test extra over it (`make test`).
SUM := $(shell cksum pyproject.toml | cut -d' ' -f1)
RUN_STAMP := $(VENV)/.installed-run-$(SUM)
TEST_STAMP := $(VENV)/.installed-test-$(SUM)
HOME_DIR ?= .vaultgraph
# make test uses its own Neo4j (other ports, other data) so it never touches make run's.
TEST_ENV := VAULTGRAPH_HOME=$(HOME_DIR) VAULTGRAPH_NEO4J_BOLT_PORT=7688 VAULTGRAPH_NEO4J_HTTP_PORT=7475
PYTEST_ARGS ?=

.PHONY: run test lint docs mutation bench bench-deps bench-scale bench-soak bench-first-sight run-deps \
  test-deps venv \
  test-venv sdk-deps neo4j-stop clean

# What running needs: Java 17 and Maven (the launcher fetches Neo4j with them).
run-deps:
	@command -v java >/dev/null && command -v mvn >/dev/null || { \
	  echo "installing Java 17 and Maven from Debian's packages"; \
	  apt-get update -q && apt-get install -y -q openjdk-17-jre-headless maven; }

# What the tests need on top: Node.js and npm, curl, Chromium.
test-deps: run-deps
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	  echo "installing Node.js and npm from Debian's packages (the Basis Theory SDK test runs on it)"; \
	  apt-get update -q && apt-get install -y -q nodejs npm; }
	@command -v curl >/dev/null || { \
	  echo "installing curl from Debian's packages (the README's and docs/ examples run in the tests)"; \
	  apt-get update -q && apt-get install -y -q curl; }
	@command -v chromium >/dev/null || { \
	  echo "installing Chromium from Debian's packages (the Neo4j Browser test drives it)"; \
	  apt-get update -q && apt-get install -y -q chromium; }
	@command -v softhsm2-util >/dev/null && command -v pkcs11-tool >/dev/null || { \
	  echo "installing SoftHSM2 and OpenSC from Debian's packages (the PKCS#11 key custody tests)"; \
	  apt-get update -q && apt-get install -y -q softhsm2 opensc; }

$(RUN_STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	rm -f $(VENV)/.installed-*
	touch $(RUN_STAMP)

$(TEST_STAMP): $(RUN_STAMP)
	$(BIN)/pip install -q -e '.[test]'
	touch $(TEST_STAMP)

# The package and what it needs to run.
venv: run-deps $(RUN_STAMP)

# venv and the test extra (pytest, ruff, import-linter, mutmut, …): the Python side of
# `make test`, and all that `make lint` and `make mutation` need.
test-venv: venv $(TEST_STAMP)

# The public Basis Theory JS SDK, at the version its lockfile pins (tests/hardening/test_sdk.py).
tests/sdk/node_modules/.package-lock.json: tests/sdk/package-lock.json
	cd tests/sdk && npm ci --no-audit --no-fund --loglevel=error

sdk-deps: test-deps tests/sdk/node_modules/.package-lock.json

# An exported VAULTGRAPH_HOME is the service's folder; ./.vaultgraph otherwise (`make clean`
# removes only that one).
run: venv
	VAULTGRAPH_HOME=$${VAULTGRAPH_HOME:-$(HOME_DIR)} $(BIN)/vaultgraph serve --local-neo4j --workers $${VAULTGRAPH_WORKERS:-0}

test: test-deps test-venv sdk-deps
	$(TEST_ENV) $(BIN)/vaultgraph neo4j run -- sh -c '$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here"; exit 1; fi; exit $$rc'

lint: test-venv
	$(BIN)/ruff check vaultgraph tests bench
	$(BIN)/lint-imports

# The documentation site (docs/, mkdocs.yml) into site/; `make test` builds it too, with
# --strict, in tests/docs/test_site.py.
docs: test-venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Mutation testing (docs/development.md): mutants of the validators, access rules and dedup decisions against
# the unit tests (no Neo4j); minutes, so not part of `make test`. `mutmut results` lists them.
mutation: test-venv
	rm -rf mutants
	$(BIN)/mutmut run
	$(BIN)/mutmut results

# Benchmarks (docs/performance.md): their own Neo4j (7689/7476) and service (8089); BENCH_* env.
bench-deps: test-venv
	@test -x $(BIN)/py-spy || $(BIN)/pip install -q -e '.[test,bench]'
	@command -v wrk >/dev/null || { apt-get update -q && apt-get install -y -q wrk; } \
	  || echo "wrk unavailable: the benchmark falls back to its aiohttp client"

bench: bench-deps
	$(BIN)/python -m bench

bench-scale: bench-deps
	$(BIN)/python -m bench --scale

bench-soak: bench-deps
	$(BIN)/python -m bench --soak

bench-first-sight: bench-deps
	$(BIN)/python -m bench --first-sight

neo4j-stop:
	-VAULTGRAPH_HOME=$(HOME_DIR) $(BIN)/vaultgraph neo4j stop
	-[ -z "$${VAULTGRAPH_HOME:-}" ] || $(BIN)/vaultgraph neo4j stop
	-$(TEST_ENV) $(BIN)/vaultgraph neo4j stop

clean: neo4j-stop
	rm -rf $(VENV) $(HOME_DIR)
