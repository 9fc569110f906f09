"""Two gateway processes on one PostgreSQL database, behind a switchable TCP proxy (a load
balancer's failover): the client's reconnect lands on the replica that never read the
upstream while the first one still does, and it gets exactly what it missed, then the
live rest. And PostgreSQL restarted mid-stream: nothing the client was shown is lost.

Real processes: the Python SDK upstream (no event store, `tests/support/upstreams`), two
`mcp-eventlog gateway` processes sharing the database and the scope secret, the official
clients. Orderings are awaited on the clients' output and the upstream's gates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway_matrix.conftest import matrix_gateway
from tests.support.databases import empty_postgres
from tests.support.private_postgres import PrivatePostgres, private_database
from tests.support.processes import ServerProcess
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import CLIENTS, TsClient, mcp_client
from tests.support.upstreams import upstream_process

pytestmark = [pytest.mark.process, pytest.mark.postgresql, pytest.mark.soak]  # make soak


@pytest.fixture(scope="module")
def replicas(
    postgres_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess]]:
    """The Python SDK upstream and two gateways in front of it on one PostgreSQL database."""
    workdir = tmp_path_factory.mktemp("replicas")
    asyncio.run(empty_postgres(postgres_database))
    with upstream_process("python", workdir) as up:
        mcp = f"{up.base_url}/mcp"
        with (
            matrix_gateway(mcp, postgres_database, workdir) as first,
            matrix_gateway(mcp, postgres_database, workdir) as second,
        ):
            yield up, first, second


def progress_of(run: TsClient, op: int) -> list[int]:
    return [int(line["progress"]) for line in run.of(op, "progress")]


async def open_gate(upstream: ServerProcess, name: str) -> None:
    async with httpx.AsyncClient() as client:
        (await client.post(f"{upstream.base_url}/test/gates/{name}")).raise_for_status()


async def steps_sent(upstream: ServerProcess, tag: str) -> int:
    async with httpx.AsyncClient() as client:
        steps: int = (await client.get(f"{upstream.base_url}/test/steps/{tag}")).json()["steps"]
        return steps


@pytest.mark.parametrize("client", CLIENTS)
async def test_the_reconnect_lands_on_the_other_replica_while_the_first_still_reads(
    replicas: tuple[ServerProcess, ServerProcess, ServerProcess], client: str
) -> None:
    upstream, first, second = replicas
    tag = f"replica-{client}"
    call = {"n": 10, "pause_at": 4, "tag": tag}
    program = [{"op": "call", "arguments": call, "timeout_ms": 30000}]
    with TcpProxy(first.port) as proxy:
        async with mcp_client(client, proxy.base_url, program) as run:
            await run.until(lambda r: len(r.of(0, "progress")) >= 4)
            # Fail over: what is open is cut, every new connection goes to the second replica.
            proxy.target_port = second.port
            proxy.cut()
            # The upstream goes on only now: steps 5..10 are read by the FIRST gateway (its
            # upstream response is still open), recorded, and must reach the client through
            # the second one, live.
            await open_gate(upstream, f"{tag}:continue")
            await run.finished()
    assert progress_of(run, 0) == list(range(1, 11)), run.lines
    (result,) = run.of(0, "result")
    assert result["text"] == "counted to 10"
    assert second.port in proxy.targets, "the reconnect never reached the second replica"
    assert await steps_sent(upstream, tag) == 10


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of our own, to restart mid-stream."""
    with private_database() as server:
        yield server


# Known and open (issue 18): after the restart the call ends with its result, but a resume
# from the first id gets no result: the response was relayed unstored while the database was
# away, so that generation never becomes terminal in the log. Seen failing at this stop.
@pytest.mark.xfail(reason="a response relayed unstored leaves its generation open", strict=False)
async def test_postgresql_restarted_mid_stream_loses_nothing_the_client_was_shown(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    """The database goes away and comes back while a call streams: every notification the
    client saw with an id is in the log (a resume from the first id replays all of them),
    and the call ends with its result."""
    with upstream_process("python", tmp_path) as up:
        mcp = f"{up.base_url}/mcp"
        with matrix_gateway(mcp, private_pg.url, tmp_path) as gateway:
            tag = "pg-restart"
            program = [
                {"op": "call", "arguments": {"n": 12, "pause_at": 4, "tag": tag}},
                {"op": "resume", "token": {"call": 0, "index": 1}, "timeout_ms": 30000},
            ]
            async with mcp_client("py", gateway.base_url, program) as run:
                await run.until(lambda r: len(r.of(0, "progress")) >= 4)
                private_pg.stop("immediate")
                await open_gate(up, f"{tag}:continue")
                await run.until(lambda r: len(r.of(0, "progress")) >= 8)
                private_pg.start()
                await run.finished(within=90)
    assert progress_of(run, 0) == list(range(1, 13)), run.lines
    (result,) = run.of(0, "result")
    assert result["text"] == "counted to 12"
    # Messages relayed while the database was down carry no `id:` line, and an SSE event
    # without one keeps the last id (the spec's last-event-id buffer): the client is shown
    # the last *stored* id again, never a new one. Every id shown is stored: a resume
    # from step 1's id replays at least every later event that had one (the distinct ids
    # shown less the priming event's and step 1's), the result among them.
    shown = list(dict.fromkeys(line["token"] for line in run.of(0, "token")))
    resumed = progress_of(run, 1)
    assert resumed == sorted(set(resumed)), resumed
    assert run.of(1, "result"), run.lines
    assert len(resumed) + 1 >= len(shown) - 2, run.lines
