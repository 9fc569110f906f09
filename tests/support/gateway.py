"""The gateway and its upstreams as processes, for the gateway's tests (and others').

`python_upstream(workdir)` runs `tests.support.upstreams.python_server` (the official
Python SDK server with no event store); `gateway_process(upstream, database_url, workdir)`
runs `python -m app gateway --upstream URL` on a free port, migrated on start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import ServerProcess, free_port

SECRET = "gateway-test-secret-0123456789"


def python_upstream_process(workdir: Path, *extra: str) -> ServerProcess:
    """The Python SDK upstream (not started); its MCP endpoint is `<base_url>/mcp`."""
    port = free_port()
    argv = ["-m", "tests.support.upstreams.python_server", "--port", str(port), *extra]
    return ServerProcess.program(argv, port=port, log_path=workdir / f"upstream-{port}.log")


@contextmanager
def python_upstream(workdir: Path, *extra: str) -> Iterator[ServerProcess]:
    """The Python SDK upstream, running for the block."""
    with python_upstream_process(workdir, *extra) as server:
        yield server


def gateway_process_of(
    upstream_mcp_url: str,
    database_url: str,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> ServerProcess:
    """`mcp-eventlog gateway --upstream URL` on `database_url` (not started)."""
    port = port or free_port()
    log = workdir / f"gateway-{port}-{time.monotonic_ns()}.log"
    settings = {
        "EVENTLOG_MIGRATE_ON_START": "true",
        "EVENTLOG_GATEWAY_SECRET": SECRET,
        "EVENTLOG_LIVE_RETRY_MS": "200",
        **(env or {}),
    }
    server = ServerProcess(database_url, log_path=log, env=settings, cwd=workdir, port=port)
    server.argv = ("-m", "app", "gateway", "--upstream", upstream_mcp_url, "--port", str(port))
    return server


@contextmanager
def gateway_process(
    upstream_mcp_url: str,
    database_url: str,
    workdir: Path,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServerProcess]:
    """The gateway, running for the block."""
    with gateway_process_of(upstream_mcp_url, database_url, workdir, env) as server:
        yield server


@contextmanager
def gateway_before(
    upstream: ServerProcess,
    workdir: Path,
    database_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServerProcess]:
    """`upstream` (a process not yet started) and the gateway in front of its `/mcp`, on
    `database_url` (none: `gateway.db`, SQLite, in `workdir`), both running for the block;
    yields the gateway."""
    database_url = database_url or f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"
    with (
        upstream,
        gateway_process(f"{upstream.base_url}/mcp", database_url, workdir, env) as gateway,
    ):
        yield gateway
