"""An upstream that cannot go on: every recorded call still ends, in its answer or in a
visible `-32011` (`data.reason: "upstream_lost"`), within a bound — never a silent end of
the recording and a client waiting for ever.

Real processes: the gateway on SQLite in front of `hostile_upstream.py` (a stream with
event ids that ends unanswered, its reconnect refused, answered 404, answered with JSON,
answered with a priming event only — a reconnect that brings no message is fruitless, so
it cannot go on without end — or told to wait an hour by `retry:`), and the SDK's server
with an event store of its own (it gives event ids) killed mid-call, seen through the
official Python client.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.gateway.clients import Progress, call_progress, mcp_client
from tests.support.gateway import gateway_process_of
from tests.support.mcp_raw import open_session, post_sse, tool_call
from tests.support.processes import free_port, mcp_server_process
from tests.support.upstreams import hostile_upstream_process

pytestmark = pytest.mark.process

UPSTREAM_LOST = -32011
RECONNECTS = 2
SETTINGS = {
    "EVENTLOG_GATEWAY_RECONNECTS": str(RECONNECTS),
    "EVENTLOG_GATEWAY_MAX_RETRY_MS": "200",
    "EVENTLOG_GATEWAY_CONNECT_TIMEOUT_SECONDS": "2",
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the gateway's MCP endpoint, the hostile upstream's base URL)."""
    workdir = tmp_path_factory.mktemp("upstream-failures")
    database = f"sqlite+aiosqlite:///{workdir / 'gateway.db'}"
    with hostile_upstream_process(workdir) as upstream:
        gateway = gateway_process_of(f"{upstream.base_url}/mcp", database, workdir, SETTINGS)
        with gateway:
            yield f"{gateway.base_url}/mcp", upstream.base_url


async def _reconnects(http: httpx.AsyncClient, upstream: str) -> int:
    count: int = (await http.get(f"{upstream}/test/reconnects")).json()["count"]
    return count


@pytest.mark.parametrize("reconnect", ["refuse", "404", "json", "priming"])
async def test_an_upstream_that_cannot_go_on_fails_the_call_visibly_after_bounded_reconnects(
    hostile: tuple[str, str], reconnect: str
) -> None:
    mcp, upstream = hostile
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await open_session(http, mcp)
        before = await _reconnects(http, upstream)
        started = time.monotonic()
        with anyio.fail_after(20):
            _, found = await post_sse(http, mcp, sid, tool_call(7, mode="ids", reconnect=reconnect))
        elapsed = time.monotonic() - started
        reconnects = await _reconnects(http, upstream) - before
    assert found[0]["method"] == "notifications/progress"
    lost = found[-1]
    assert lost["id"] == 7
    assert lost["error"]["code"] == UPSTREAM_LOST
    assert lost["error"]["data"]["reason"] == "upstream_lost"
    assert f"{RECONNECTS} reconnects brought nothing" in lost["error"]["data"]["detail"]
    # Exactly the fruitless reconnects allowed: a priming event with a new id is no progress.
    assert reconnects == RECONNECTS
    # The bound: RECONNECTS * (the capped retry + one refused or empty reconnect).
    assert elapsed < RECONNECTS * (0.2 + 2) + 3


async def test_a_retry_of_an_hour_is_capped_by_the_setting(hostile: tuple[str, str]) -> None:
    mcp, _ = hostile
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await open_session(http, mcp)
        with anyio.fail_after(15):  # an hour if `retry:` were obeyed
            arguments = {"mode": "ids", "reconnect": "result", "retry": 3_600_000}
            _, found = await post_sse(http, mcp, sid, tool_call(8, **arguments))
    assert found[-1]["id"] == 8
    assert found[-1]["result"]["content"][0]["text"] == "reconnected"


async def test_the_official_python_client_sees_the_lost_upstream_as_an_error(
    hostile: tuple[str, str],
) -> None:
    mcp, _ = hostile
    async with mcp_client(mcp) as (session, _, _):
        with anyio.fail_after(20), pytest.raises(MCPError) as failed:
            await call_progress(session, Progress(), n=1, mode="ids", reconnect="404")
    assert failed.value.error.code == UPSTREAM_LOST
    assert failed.value.error.data["reason"] == "upstream_lost"


async def test_an_upstream_with_its_own_event_store_killed_mid_call_fails_the_call(
    gateway_database: str, tmp_path: Path
) -> None:
    """The SDK's server with an event store gives event ids: once it is killed, the
    gateway's reconnects are refused, and the client hears `-32011`."""
    gateway_port, upstream_port = free_port(), free_port()
    upstream = mcp_server_process(f"http://127.0.0.1:{gateway_port}", tmp_path, port=upstream_port)
    gateway = gateway_process_of(
        f"http://127.0.0.1:{upstream_port}/mcp",
        gateway_database,
        tmp_path,
        SETTINGS,
        port=gateway_port,
    )
    with gateway, upstream:
        progress = Progress()
        async with mcp_client(f"{gateway.base_url}/mcp") as (session, _, _):
            failure: list[MCPError] = []

            async def call() -> None:
                try:
                    await call_progress(session, progress, n=5, pause_at=2, tag="kill")
                except MCPError as error:
                    failure.append(error)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call)
                    await progress.at(2).wait()
                    upstream.kill()
        assert failure, "the call ended without an error"
        assert failure[0].error.code == UPSTREAM_LOST
        assert failure[0].error.data["reason"] == "upstream_lost"
