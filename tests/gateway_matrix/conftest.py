"""Gateways for the matrix: one `mcp-eventlog gateway` per (database, upstream), started
when a test first asks for it and kept for the module, each in front of its own upstream
process (tests/support/upstreams) with no event store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.databases import empty_postgres
from tests.support.gateway import gateway_process_of
from tests.support.processes import ServerProcess
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import TsClient, mcp_client
from tests.support.upstreams import open_gate, upstream_process


def matrix_gateway(
    upstream_mcp_url: str, database_url: str, workdir: Path, env: dict[str, str] | None = None
) -> ServerProcess:
    """tests/support/gateway.py's gateway (not started) with the matrix's settings, given
    two minutes to start: seven sessions share two cores here."""
    server = gateway_process_of(
        upstream_mcp_url, database_url, workdir, {**MATRIX_SETTINGS, **(env or {})}
    )
    server.start_timeout = 120.0
    return server


@contextmanager
def two_replicas(
    database_url: str,
    workdir: Path,
    prepare: Callable[[ServerProcess], ServerProcess] = lambda gateway: gateway,
) -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess]]:
    """The Python SDK upstream and two gateways in front of it on one PostgreSQL database
    (emptied first), each `prepare`d before it starts: (upstream, first, second)."""
    asyncio.run(empty_postgres(database_url))
    with upstream_process("python", workdir) as up:
        mcp = f"{up.base_url}/mcp"
        with (
            prepare(matrix_gateway(mcp, database_url, workdir)) as first,
            prepare(matrix_gateway(mcp, database_url, workdir)) as second,
        ):
            yield up, first, second


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
                gateway = matrix_gateway(f"{up.base_url}/mcp", database_url, workdir, env)
                server = stack.enter_context(gateway)
                running[key] = Gateway(server, up, database_url)
            return running[key]

        yield get


async def failed_over_mid_call(
    client: str,
    replicas: tuple[ServerProcess, ServerProcess, ServerProcess],
    tag: str,
    *,
    n: int,
    pause_at: int,
) -> tuple[TsClient, TcpProxy]:
    """A call of `n` steps by `client` through a proxy to the first of (upstream, first,
    second), its upstream paused at step `pause_at`; once that step arrives, fail over:
    what is open is cut, every new connection goes to the second replica; the upstream goes
    on only then. The finished run, and the proxy (where its connections went)."""
    upstream, first, second = replicas
    call = {"n": n, "pause_at": pause_at, "tag": tag}
    program = [{"op": "call", "arguments": call, "timeout_ms": 30000}]
    with TcpProxy(first.port) as proxy:
        async with mcp_client(client, proxy.base_url, program) as run:
            await run.until(lambda r: len(r.of(0, "progress")) >= pause_at)
            proxy.target_port = second.port
            proxy.cut()
            await open_gate(upstream.base_url, f"{tag}:continue")
            await run.finished()
    return run, proxy
