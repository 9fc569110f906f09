"""A gateway replica that dies mid-call is seen by the client that reconnects elsewhere.

Two `mcp-eventlog gateway` processes on one PostgreSQL database behind a switchable TCP
proxy (a balancer without affinity); the upstream is the Python SDK server with no event
store. The replica reading the upstream's response is killed (`kill -9`) mid-call: its
recording's writer lease is no longer renewed, so the other replica's sweep records the
generation abandoned, and the client that reconnected there gets what was recorded, then
the JSON-RPC error -32011 with `data.reason: "abandoned"` — within the lease plus one
sweep (plus a second of slack), never a hang. And a replica that is alive keeps renewing
the lease of a call that says nothing for three leases: it is never abandoned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway_matrix.conftest import matrix_gateway
from tests.support.databases import empty_postgres
from tests.support.processes import ServerProcess
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import CLIENTS, mcp_client, progress_of
from tests.support.upstreams import open_gate, upstream_process

pytestmark = [pytest.mark.process, pytest.mark.postgresql]

LEASE_SECONDS = 2
SWEEP_SECONDS = 0.5
LEASES = {
    "EVENTLOG_WRITER_LEASE_SECONDS": str(LEASE_SECONDS),
    "EVENTLOG_LEASE_SWEEP_SECONDS": str(SWEEP_SECONDS),
}
RECORDING_LOST = -32011
# The bound the contract gives (lease + sweep) plus a second of slack, and the time a client
# takes to notice the cut and reconnect on two shared cores.
WITHIN_SECONDS = LEASE_SECONDS + SWEEP_SECONDS + 1 + 5


@pytest.fixture
def upstream(tmp_path: Path, postgres_database: str) -> Iterator[ServerProcess]:
    asyncio.run(empty_postgres(postgres_database))
    with upstream_process("python", tmp_path) as up:
        yield up


@pytest.mark.parametrize("client", CLIENTS)
async def test_the_recording_replica_killed_mid_call_ends_the_call_visibly_on_the_other(
    upstream: ServerProcess, postgres_database: str, tmp_path: Path, client: str
) -> None:
    mcp = f"{upstream.base_url}/mcp"
    tag = f"failover-{client}"
    # The call pauses after 4 steps until its gate opens — which never happens: the replica
    # reading it dies first.
    program = [
        {"op": "call", "arguments": {"n": 10, "pause_at": 4, "tag": tag}, "timeout_ms": 60000}
    ]
    with (
        matrix_gateway(mcp, postgres_database, tmp_path, LEASES) as first,
        matrix_gateway(mcp, postgres_database, tmp_path, LEASES) as second,
        TcpProxy(first.port) as proxy,
    ):
        async with mcp_client(client, proxy.base_url, program) as run:
            await run.until(lambda r: len(r.of(0, "progress")) >= 4)
            first.kill()
            killed = time.monotonic()
            proxy.target_port = second.port
            proxy.cut()
            await run.until(
                lambda r: bool(r.of(0, "error") or r.of(0, "result")), within=WITHIN_SECONDS + 30
            )
            ended = time.monotonic() - killed
        (error,) = run.of(0, "error")
        assert error["code"] == RECORDING_LOST, run.lines
        assert error["data"]["reason"] == "abandoned", run.lines
        assert progress_of(run, 0) == [1, 2, 3, 4], run.lines
        assert not run.of(0, "result"), run.lines
        assert ended <= WITHIN_SECONDS, f"the error came {ended:.1f} s after the kill"
        assert second.port in proxy.targets


async def test_a_silent_call_on_a_live_replica_is_never_abandoned(
    upstream: ServerProcess, postgres_database: str, tmp_path: Path
) -> None:
    mcp = f"{upstream.base_url}/mcp"
    tag = "silent-call"
    program = [{"op": "call", "arguments": {"n": 6, "pause_at": 2, "tag": tag}}]
    with matrix_gateway(mcp, postgres_database, tmp_path, LEASES) as gateway:
        async with mcp_client("py", gateway.base_url, program) as run:
            await run.until(lambda r: len(r.of(0, "progress")) >= 2)
            await asyncio.sleep(3 * LEASE_SECONDS + SWEEP_SECONDS)  # nothing said meanwhile
            await open_gate(upstream.base_url, f"{tag}:continue")
            await run.finished()
    assert progress_of(run, 0) == [1, 2, 3, 4, 5, 6], run.lines
    (result,) = run.of(0, "result")
    assert result["text"] == "counted to 6"
    assert not run.of(0, "error"), run.lines
