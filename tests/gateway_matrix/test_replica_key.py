"""Two gateway processes on one PostgreSQL database WITHOUT `EVENTLOG_GATEWAY_SECRET`: the
key of the session scopes is kept in the database (created once, by whichever replica
needs it first), so a reconnect that lands on the other replica resumes instead of being
refused `invalid`/`cross_session`.

Real processes: the Python SDK upstream (no event store), two `mcp-eventlog gateway`
processes started with no secret, a switchable TCP proxy in front (a load balancer's
failover), the official clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.gateway_matrix.conftest import failed_over_mid_call, two_replicas
from tests.support.mcp_raw import initialize as initialize_request
from tests.support.processes import ServerProcess
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import mcp_client, progress_of

pytestmark = [pytest.mark.process, pytest.mark.postgresql]

Replicas = tuple[ServerProcess, ServerProcess, ServerProcess, str]


def keyless(server: ServerProcess) -> ServerProcess:
    """The gateway process without the scope secret the test support gives it."""
    server.extra_env.pop("EVENTLOG_GATEWAY_SECRET", None)
    return server


@pytest.fixture(scope="module")
def replicas(
    postgres_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    """The Python SDK upstream and two keyless gateways in front of it on one database."""
    workdir = tmp_path_factory.mktemp("replica-key")
    with two_replicas(postgres_database, workdir, keyless) as (up, first, second):
        yield up, first, second, postgres_database


async def initialize(gateway: ServerProcess) -> None:
    """An MCP `initialize` through `gateway` (its first MCP request reads the key)."""
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(
            f"{gateway.base_url}/mcp", headers=headers, json=initialize_request("raw", rid=1)
        )
        assert answer.status_code == 200, answer.text


async def stored_keys(database_url: str) -> list[str]:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text("SELECT name FROM secrets ORDER BY name"))
            return [str(row[0]) for row in rows]
    finally:
        await engine.dispose()


async def test_replicas_asking_at_once_keep_one_key_and_resume_each_others_streams(
    replicas: Replicas,
) -> None:
    """Both replicas' first MCP requests at once (each reads or creates the key then): one
    key is stored, and a stream recorded through the first is resumed through the second."""
    _up, first, second, database_url = replicas
    await asyncio.gather(initialize(first), initialize(second))
    assert await stored_keys(database_url) == ["gateway.scope"]
    program = [
        {"op": "call", "arguments": {"n": 4}},
        {"op": "wait"},
        {"op": "resume", "token": {"call": 0, "index": 1}, "timeout_ms": 15000},
    ]
    with TcpProxy(first.port) as proxy:
        async with mcp_client("ts-v2", proxy.base_url, program) as run:
            await run.until(lambda r: bool(r.of(1, "waiting")))
            proxy.target_port = second.port  # the resume's new connection: the other replica
            await run.go_on()
            await run.finished()
    assert second.port in proxy.targets, "the resume never reached the second replica"
    assert not run.of(2, "error"), run.lines
    assert progress_of(run, 2) == [2, 3, 4], run.lines
    (result,) = run.of(2, "result")
    assert result["text"] == "counted to 4"


@pytest.mark.parametrize("client", ["py", "ts-v1"])
async def test_the_clients_own_reconnect_lands_on_the_other_replica_and_resumes(
    replicas: Replicas, client: str
) -> None:
    """A call read by the first replica, the connection cut mid-stream and every new one
    sent to the second: the client's own reconnect resumes there (the same session scope
    on both, with no secret configured), every step once, then the result."""
    upstream, first, second, _ = replicas
    run, proxy = await failed_over_mid_call(
        client, (upstream, first, second), f"keyless-{client}", n=8, pause_at=3
    )
    assert not run.of(0, "error"), run.lines
    assert progress_of(run, 0) == list(range(1, 9)), run.lines
    (result,) = run.of(0, "result")
    assert result["text"] == "counted to 8"
    assert second.port in proxy.targets, "the reconnect never reached the second replica"
