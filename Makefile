# The one place that says how to install, run, test, lint and benchmark mcp-eventlog.
# Every target installs what it needs first (into .venv), so each works on a fresh clone.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install run migrate test test-sqlite soak lint domain-coverage format docker bench bench-quick bench-tools clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,mcp]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)  ## create .venv and install the service with its dev and MCP extras

run: $(STAMP)  ## serve on 127.0.0.1:8080 with the SQLite file ./eventlog.db (migrated on start)
	$(BIN)/mcp-eventlog serve

migrate: $(STAMP)  ## bring EVENTLOG_DATABASE_URL to the newest migration
	$(BIN)/mcp-eventlog migrate

test: $(STAMP)  ## the whole suite, on SQLite and PostgreSQL (CI=true: PostgreSQL must be there)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-sqlite: $(STAMP)  ## the suite without its PostgreSQL half
	$(BIN)/python -m pytest -m "not postgresql" $(PYTEST_ARGS)

soak: $(STAMP)  ## the long reliability variants (kill -9 rounds, PostgreSQL restarts, fuzzing): ~10 min
	EVENTLOG_SOAK=1 $(BIN)/python -m pytest tests/reliability $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff check, ruff format --check, mypy --strict on app
	$(BIN)/ruff check app tests migrations
	$(BIN)/ruff format --check app tests migrations
	$(BIN)/mypy --strict app

domain-coverage: $(STAMP)  ## the decision table's tests cover every branch of app/domain
	$(BIN)/python -m coverage run --branch --source=app/domain --data-file=.coverage.domain -m pytest -q -p no:cacheprovider tests/domain
	$(BIN)/python -m coverage report --data-file=.coverage.domain --fail-under=100 --show-missing

docker:  ## build the image (needs a Docker engine)
	docker build -t mcp-eventlog .

format: $(STAMP)
	$(BIN)/ruff check --fix app tests migrations
	$(BIN)/ruff format app tests migrations

# wrk is the outside load generator of the append figures (Debian package `wrk`). Installed
# with apt-get when missing and we are root; when it cannot be, the bench says so and falls
# back to its own Python load process (bench/load.py), so this target never fails.
bench-tools:  ## install wrk (apt-get) for the bench when it is missing
	@if command -v wrk >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "bench-tools: wrk is missing and apt-get cannot run here (not root?); the bench falls back to its Python load process"; \
	else \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq wrk >/dev/null 2>&1 \
		|| { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq wrk >/dev/null 2>&1; } \
		|| echo "bench-tools: apt-get could not install wrk; the bench falls back to its Python load process"; \
	fi

bench: $(STAMP) bench-tools  ## the benchmarks (under 10 min): tables on stdout, JSON + PNG in bench/results/
	$(BIN)/python -m bench

bench-quick: $(STAMP) bench-tools  ## the same at small sizes (under a minute; CI's smoke run, never asserts times)
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
