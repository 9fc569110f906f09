"""Helpers the tests share; not test modules. Look here before writing set-up code.

Databases (`databases.py`; fixtures in `tests/conftest.py`)
    `database_url` / `backend`: an empty migrated database per test, on SQLite and
    PostgreSQL (the run's one PostgreSQL database, emptied by `empty_postgres`).
    `backend_database(request, workdir)` + `BACKEND_PARAMS`: the same for a module-scoped
    fixture whose server process serves both backends.
    `private_postgres.private_database()` (fixture `private_pg` in tests/reliability): a
    PostgreSQL server of the test's own, to stop and restart.

Server processes (`processes.py`): the one way to run a real server process
    `ServerProcess(database_url, log_path=..., env={...})`: `python -m app serve` on a free
    port of 127.0.0.1; `start()` (waits for `/healthz`), `stop()`, `kill()` (-9), `start()`
    again to restart, `log()`, `rss()`, `base_url`, `pid`; a context manager too.
    `ServerProcess.program(argv, port=...)`: any Python program serving HTTP.
    `running_server(env)` yields a URL; `eventlog_service(database_url, workdir, env=...)`
    a service migrating on start; `mcp_server(eventlog_url, workdir)` the test MCP server
    (`mcp_server.py`) in front of one; `deployment.py` names that pair for
    clients/python/tests/mcp, and `sdk_session.py` is the SDK's client of it.
    `bus_server.py`: an MCP server (2026-07-28) whose bus is `EventLogSubscriptionBus`,
    run twice as two replicas by clients/python/tests/mcp/test_bus.py.
    `hostile_service.hostile_service(workdir)`: a fake service that misbehaves by key
    (HTML, drips, endless and gzip-bomb bodies, bad SSE frames, redirects);
    `hostile_calls.py` runs one client call against it in a process of its own and
    reports its peak RSS.
    `process_memory.RssSampler`: the peak RSS of a process while a block runs.
    `StartedInWith`: `with thing:` starts and stops anything with `start()`/`stop()`.
    `gates.served_gates(server)`: a test MCP server's `POST /test/gates/{name}`, which a
    tool waits on (how a test orders events across processes).
    `gateway.gateway_before(upstream, workdir)`: an upstream process and the gateway in
    front of it; `upstreams/raw_server.py`: the hand-written upstreams' command line.

The app in-process
    `app.app_client(settings)` / `make_settings(url)`: the app behind an
    `httpx.AsyncClient`, lifespan included; `operators.py`: keyed apps, one client per key;
    `driver.py`: the same from synchronous code (hypothesis state machines);
    `services.py`: the writer API without the app, on an opened `Database`, built from
    exactly the settings slices it takes (`writer_service`, `opened_database`).

Calling the API and reading what it stored
    `writer_calls.py` (open, append, with status checks), `sse.py` (a real SSE parser on a
    live read), `live_readers.py` (thousands of light readers), `transports.py` (httpx
    transports that lose or fake answers), `ledger.py` (what writers were told versus what
    the database holds), `reference.py` (a model of the contract written from the docs).

What a test needs from the machine (`needs.py`)
    `missing(what, why)`: skip with the reason, or fail under `CI=true`, where nothing may
    skip. PostgreSQL, Chromium (`browser.py`), promtool and Node (`ts_harness.py`) all end
    there. `soak.soak_enabled()`: whether the long variants run (`make soak`).
    `ts_harness.ts_client(url, program, sdk="v1"|"v2")`: the official TypeScript MCP
    client of either generation, driven by a JSON program (`ts_client/client.mjs`).
"""
