"""Gateways for the matrix: one `mcp-eventlog gateway` per (database, upstream), started
when a test first asks for it and kept for the module, each in front of its own upstream
process (tests/support/upstreams) with no event store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.databases import empty_postgres
from tests.support.gateway import gateway_process_of
from tests.support.processes import ServerProcess
from tests.support.upstreams import upstream_process


@dataclass
class Gateway:
    """A gateway process and the upstream behind it."""

    server: ServerProcess
    upstream: ServerProcess
    database_url: str

    @property
    def url(self) -> str:
        """The gateway's base URL (its MCP endpoint is `/mcp`)."""
        return self.server.base_url


GatewayFactory = Callable[..., Gateway]
MATRIX_SETTINGS = {
    # A stream resumed after its result replays the rest (the case); the service's
    # default policy (`reset`) would refuse every resume into a finished generation.
    "EVENTLOG_TERMINAL_RESUME": "replay",
    # Sessions the clients leave open keep standalone GET streams: do not wait 10 s on them.
    "EVENTLOG_GATEWAY_SHUTDOWN_GRACE_SECONDS": "2",
}


def database_of(request: pytest.FixtureRequest, db: str, workdir: Path, name: str) -> str:
    """A database of `db` for one gateway: a new SQLite file, or the run's PostgreSQL one."""
    if db == "sqlite":
        return f"sqlite+aiosqlite:///{workdir / f'{name}.db'}"
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayFactory]:
    """`gateways(request, db, upstream, **env)`: the module's gateway of that database and
    upstream (with those extra settings), started on the first test that asks for it (its
    `request` gives the PostgreSQL database) and stopped at the module's end."""
    workdir = tmp_path_factory.mktemp("gateway-matrix")
    running: dict[tuple[str, str, tuple[tuple[str, str], ...]], Gateway] = {}
    emptied: set[str] = set()
    with ExitStack() as stack:

        def get(request: pytest.FixtureRequest, db: str, upstream: str, **env: str) -> Gateway:
            key = (db, upstream, tuple(sorted(env.items())))
            if key not in running:
                name = f"{db}-{upstream}-{len(running)}"
                database_url = database_of(request, db, workdir, name)
                if db == "postgresql" and database_url not in emptied:
                    # Tests run in an event loop: empty it from a thread with its own.
                    with ThreadPoolExecutor(1) as pool:
                        pool.submit(asyncio.run, empty_postgres(database_url)).result()
                    emptied.add(database_url)
                up = stack.enter_context(upstream_process(upstream, workdir))
                settings = {**MATRIX_SETTINGS, **env}
                gateway = gateway_process_of(f"{up.base_url}/mcp", database_url, workdir, settings)
                server = stack.enter_context(gateway)
                running[key] = Gateway(server, up, database_url)
            return running[key]

        yield get
