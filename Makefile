# The one place that says how to install, run, test, lint and benchmark mcp-eventlog.
# Every target installs what it needs first (into .venv), so each works on a fresh clone.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Every pip install is held to the tested versions (constraints.txt), here, in CI and in
# the Docker image alike.
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt
# What serving needs (the service alone), and everything the tests need on top of it.
SERVE_STAMP := $(VENV)/.serve-$(shell cat pyproject.toml clients/python/pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml clients/python/pyproject.toml tests/support/ts_client/package-lock.json tests/support/upstreams/ts_server/package-lock.json tests/support/conformance/package-lock.json constraints.txt | cksum | cut -d' ' -f1)

.PHONY: install run migrate dist dist-folder dist-service dist-python-client dist-typescript test check test-sqlite soak lint domain-coverage format docker bench bench-quick bench-tools clean test-tools screenshots test-typescript constraints codes

# The service depends on the Python client package of its own version (the MCP storage
# convention its gateway shares): both from this checkout, never from an index.
$(SERVE_STAMP): pyproject.toml clients/python/pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e ./clients/python -e .
	rm -f $(VENV)/.serve-* && touch $@

$(STAMP): $(SERVE_STAMP) clients/python/pyproject.toml tests/support/ts_client/package-lock.json tests/support/upstreams/ts_server/package-lock.json tests/support/conformance/package-lock.json
	$(PIP) -e '.[dev,mcp]' -e './clients/python[mcp]'
	cd tests/support/ts_client && npm ci --no-audit --no-fund --loglevel=error
	cd tests/support/upstreams/ts_server && npm ci --no-audit --no-fund --loglevel=error
	cd tests/support/conformance && npm ci --no-audit --no-fund --loglevel=error
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)  ## create .venv; install the service (dev, MCP extras), the Python client package, the TS test client

run: $(SERVE_STAMP)  ## serve on 127.0.0.1:8080 with the SQLite file ./eventlog.db (migrated on start); installs only the service
	$(BIN)/mcp-eventlog serve

migrate: $(SERVE_STAMP)  ## bring EVENTLOG_DATABASE_URL to the newest migration
	$(BIN)/mcp-eventlog migrate

constraints: $(STAMP)  ## rewrite constraints.txt from what .venv holds (after changing a dependency)
	{ sed -n '/^#/p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable --disable-pip-version-check; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# The release (README "Installing a release"): what a user installs, and the Docker image
# too. Each wheel is built from its sdist, in an isolated environment (python -m build),
# so a wheel holds only what the sdist carries, never a stray file of this checkout.
# DIST=<dir> builds elsewhere (tests/release builds once per test run, into a temporary
# folder, with -j3).
DIST ?= dist

dist: dist-service dist-python-client dist-typescript  ## build the release into dist/: the service's and the Python client's sdist and wheel, the TypeScript package's npm tarball
	@ls -l $(DIST)

dist-folder:
	mkdir -p $(DIST) && rm -f $(DIST)/*.whl $(DIST)/*.tar.gz $(DIST)/*.tgz

dist-service: $(STAMP) dist-folder
	$(BIN)/python -m build --quiet --outdir $(DIST) .

dist-python-client: $(STAMP) dist-folder
	$(BIN)/python -m build --quiet --outdir $(DIST) clients/python

dist-typescript: dist-folder
	cd clients/typescript && npm ci --no-audit --no-fund --prefer-offline --loglevel=error \
		&& npm pack --silent --pack-destination $(abspath $(DIST)) >/dev/null

# The suite is mostly waiting (servers starting, live reads, timeouts), so two pytest-xdist
# workers share it, a module (or a folder that builds one artifact) per unit of work
# (tests/support/scheduling.py): ~13 min of pytest on a quiet 2-core machine, against ~29
# in one process (`make test PARALLEL=` runs it in one process).
PARALLEL ?= -n 2 --dist loadscope

test: $(STAMP) test-tools  ## everything: the Python suite on SQLite and PostgreSQL, then the TypeScript package's (CI=true: nothing may skip)
	$(BIN)/python -m pytest $(PARALLEL) $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-typescript

# The quick loop: pytest alone (no apt, no TypeScript suite), with pytest's own arguments.
check: $(STAMP)  ## only pytest, with ARGS: make check ARGS="tests/api/routes/test_writer.py -k resume"
	$(BIN)/python -m pytest $(ARGS)

test-sqlite: $(STAMP)  ## the suite without its PostgreSQL half
	$(BIN)/python -m pytest $(PARALLEL) -m "not postgresql" $(PYTEST_ARGS)

test-typescript: $(STAMP)  ## the TypeScript package (clients/typescript): npm ci, then its tests against the service (SQLite and PostgreSQL)
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm test

soak: $(STAMP)  ## the long reliability variants (kill -9 rounds, PostgreSQL restarts, fuzzing) and the gateway's whole matrix of upstreams x clients: ~20 min
	EVENTLOG_SOAK=1 $(BIN)/python -m pytest tests/reliability tests/gateway_matrix $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff check, ruff format --check, the import contracts (lint-imports), mypy --strict on app and the Python client; tsc and prettier on the TypeScript one
	$(BIN)/ruff check app tests migrations clients/python bench
	$(BIN)/ruff format --check app tests migrations clients/python bench
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy --strict app
	$(BIN)/mypy --strict -p mcp_eventlog_client
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run lint

codes: $(SERVE_STAMP)  ## write the clients' problem-code tables and tests/fixtures/problem-codes.json from the service's (app/api/problem_table.py); a test fails until they match
	$(BIN)/python -m app.api.code_tables

domain-coverage: $(STAMP)  ## the decision table's tests cover every branch of app/domain
	$(BIN)/python -m coverage run --branch --source=app/domain --data-file=.coverage.domain -m pytest -q -p no:cacheprovider tests/domain
	$(BIN)/python -m coverage report --data-file=.coverage.domain --fail-under=100 --show-missing

docker: dist  ## build the image from the release's wheels (the service's and the Python client's; needs a Docker engine)
	docker build -t mcp-eventlog .

format: $(STAMP)
	$(BIN)/ruff check --fix app tests migrations clients/python
	$(BIN)/ruff format app tests migrations clients/python

# wrk is the outside load generator of the append figures (Debian package `wrk`). Installed
# with apt-get when missing and we are root; when it cannot be, the bench says so and falls
# back to its own Python load process (bench/loads/load.py), so this target never fails.
bench-tools:  ## install wrk (apt-get) for the bench when it is missing, and the TypeScript package's modules (its bus bench)
	@if command -v wrk >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "bench-tools: wrk is missing and apt-get cannot run here (not root?); the bench falls back to its Python load process"; \
	else \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq wrk >/dev/null 2>&1 \
		|| { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq wrk >/dev/null 2>&1; } \
		|| echo "bench-tools: apt-get could not install wrk; the bench falls back to its Python load process"; \
	fi
	cd clients/typescript && npm ci --no-audit --no-fund --prefer-offline --loglevel=error

bench: $(STAMP) bench-tools  ## the benchmarks (run times: docs/performance.md): tables on stdout, JSON + PNG in bench/results/
	$(BIN)/python -m bench

bench-quick: $(STAMP) bench-tools  ## the same at small sizes, without the TypeScript channel, gateway and failover suites (CI's smoke run, never asserts times)
	$(BIN)/python -m bench --quick

# Debian's Chromium (the console's browser tests, `make screenshots`) with a font, and
# promtool (the alert rules' tests), taken out of Debian's prometheus package into
# .venv/tools so that no Prometheus server is installed. apt needs root.
PROMTOOL := $(VENV)/tools/usr/bin/promtool

# Debian's nginx (the load-balancer tests, tests/deploy/test_nginx.py) runs the very
# configuration of deploy/nginx/ from a temporary prefix on a free loopback port; the
# package's own daemon is never started by the tests (and apt's policy here starts none).
#
# Without root and apt-get this target only says so: those tests then skip with a clear
# message, except under CI=true, where they fail.
test-tools:  ## Chromium, nginx and promtool for the console, load-balancer and monitoring tests (apt; root)
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "test-tools: no chromium, and apt-get cannot run here: the browser tests will skip"; \
	else \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; \
	fi
	@if command -v nginx >/dev/null || test -x /usr/sbin/nginx; then :; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "test-tools: no nginx, and apt-get cannot run here: the load-balancer tests will skip"; \
	else \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq --no-install-recommends nginx >/dev/null 2>&1 \
		|| { apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx >/dev/null; }; \
	fi
	@if command -v promtool >/dev/null || test -x $(PROMTOOL); then :; \
	elif ! command -v apt-get >/dev/null; then \
		echo "test-tools: no promtool, and apt-get cannot run here: the alert-rule tests will skip"; \
	else \
		mkdir -p $(VENV)/tools && cd $(VENV)/tools \
		&& { apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; }; } \
		&& dpkg-deb -x prometheus_*.deb . && rm prometheus_*.deb; \
	fi

screenshots: $(STAMP)  ## PNGs of each console view into docs/images/ (needs make test-tools)
	$(BIN)/python -m tests.support.screenshots

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
