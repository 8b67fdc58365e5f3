# The two commands: `make run` and `make test`. Everything they need, they install or start.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
HOME_DIR ?= .vaultgraph
# make test uses its own Neo4j (other ports, other data) so it never touches make run's.
TEST_ENV := VAULTGRAPH_HOME=$(HOME_DIR) VAULTGRAPH_NEO4J_BOLT_PORT=7688 VAULTGRAPH_NEO4J_HTTP_PORT=7475
PYTEST_ARGS ?=

.PHONY: run test lint mutation bench bench-deps bench-scale bench-soak system-deps venv sdk-deps neo4j-stop clean

system-deps:
	@command -v java >/dev/null && command -v mvn >/dev/null || { \
	  echo "installing Java 17 and Maven from Debian's packages"; \
	  apt-get update -q && apt-get install -y -q openjdk-17-jre-headless maven; }
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	  echo "installing Node.js and npm from Debian's packages (the Basis Theory SDK test runs on it)"; \
	  apt-get update -q && apt-get install -y -q nodejs npm; }
	@command -v curl >/dev/null || { \
	  echo "installing curl from Debian's packages (the README's examples run in the tests)"; \
	  apt-get update -q && apt-get install -y -q curl; }
	@command -v chromium >/dev/null || { \
	  echo "installing Chromium from Debian's packages (the Neo4j Browser test drives it)"; \
	  apt-get update -q && apt-get install -y -q chromium; }

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: system-deps $(STAMP)

# The public Basis Theory JS SDK, at the version its lockfile pins (tests/hardening/test_sdk.py).
tests/sdk/node_modules/.package-lock.json: tests/sdk/package-lock.json
	cd tests/sdk && npm ci --no-audit --no-fund --loglevel=error

sdk-deps: system-deps tests/sdk/node_modules/.package-lock.json

run: venv
	VAULTGRAPH_HOME=$(HOME_DIR) $(BIN)/vaultgraph serve --local-neo4j --workers $${VAULTGRAPH_WORKERS:-0}

test: venv sdk-deps
	$(TEST_ENV) $(BIN)/vaultgraph neo4j run -- sh -c '$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here"; exit 1; fi; exit $$rc'

lint: venv
	$(BIN)/ruff check vaultgraph tests bench
	$(BIN)/lint-imports

# Mutation testing (README): mutants of the validators, access rules and dedup decisions against
# the unit tests (no Neo4j); minutes, so not part of `make test`. `mutmut results` lists them.
mutation: venv
	rm -rf mutants
	$(BIN)/mutmut run
	$(BIN)/mutmut results

# Benchmarks (README "Performance"): their own Neo4j (7689/7476) and service (8089); BENCH_* env.
bench-deps: venv
	@test -x $(BIN)/py-spy || $(BIN)/pip install -q -e '.[test,bench]'
	@command -v wrk >/dev/null || { apt-get update -q && apt-get install -y -q wrk; } \
	  || echo "wrk unavailable: the benchmark falls back to its aiohttp client"

bench: bench-deps
	$(BIN)/python -m bench

bench-scale: bench-deps
	$(BIN)/python -m bench --scale

bench-soak: bench-deps
	$(BIN)/python -m bench --soak

neo4j-stop:
	-VAULTGRAPH_HOME=$(HOME_DIR) $(BIN)/vaultgraph neo4j stop
	-$(TEST_ENV) $(BIN)/vaultgraph neo4j stop

clean: neo4j-stop
	rm -rf $(VENV) $(HOME_DIR)
