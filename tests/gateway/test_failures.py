"""The gateway when something fails: the upstream dies mid-call, the log's database is
unavailable mid-stream, the gateway shuts down mid-call. Each test has its own processes
(they are stopped, killed or starved), on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.gateway.clients import Progress, call_progress, mcp_client, seqs_of, text_of
from tests.support.gateway import gateway_before, python_upstream_process
from tests.support.private_postgres import PrivatePostgres, private_database
from tests.support.processes import ServerProcess
from tests.support.upstreams import open_gate
from tests.support.waiting import until

pytestmark = pytest.mark.process

UPSTREAM_LOST = -32011


def _error_of(error: BaseException) -> MCPError:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(error)
    return error


Starter = Callable[..., AbstractContextManager[tuple[ServerProcess, ServerProcess]]]


@pytest.fixture
def upstream_and_gateway(gateway_database: str, tmp_path: Path) -> Starter:
    """Starts the Python SDK upstream and a gateway in front of it, on the backend of the
    param (`env`: the gateway's settings over the test support's), for a `with` block."""

    @contextmanager
    def start(env: dict[str, str] | None = None) -> Iterator[tuple[ServerProcess, ServerProcess]]:
        upstream = python_upstream_process(tmp_path)
        with gateway_before(upstream, tmp_path, gateway_database, env) as gateway:
            yield upstream, gateway

    return start


async def test_the_upstream_killed_mid_call_fails_the_call_with_upstream_lost(
    upstream_and_gateway: Starter,
) -> None:
    with upstream_and_gateway() as (upstream, gateway):
        progress = Progress()
        failure: list[BaseException] = []
        failed = anyio.Event()
        async with mcp_client(f"{gateway.base_url}/mcp") as (session, _, _):

            async def call() -> None:
                try:
                    await call_progress(session, progress, n=5, pause_at=2, tag="kill")
                except MCPError as error:
                    failure.append(error)
                    failed.set()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                await progress.at(2).wait()
                upstream.kill()
                with anyio.fail_after(10):  # "within seconds"
                    await failed.wait()
        error = _error_of(failure[0])
        assert error.error.code == UPSTREAM_LOST
        assert error.error.data["reason"] == "upstream_lost"
        # It is the generation's terminal event: a client that reconnects finds it.
        token = progress.tokens[0].rsplit(":", 1)[0]
        async with httpx.AsyncClient(base_url=gateway.base_url) as http:
            generation = (await http.get(f"/admin/v1/generations/{token}")).json()
            assert generation["terminal"] is True
            # The upstream is down: the gateway is not ready, and says why.
            ready = await http.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["code"] == "upstream_unreachable"
            # A request now: 502, the gateway's own problem, not a hang.
            forwarded = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert (forwarded.status_code, forwarded.json()["code"]) == (
                502,
                "upstream_unavailable",
            )
            upstream.start()
            assert (await http.get("/readyz")).status_code == 200


@contextmanager
def _sqlite_locked(database_url: str) -> Iterator[None]:
    """Another process holds the SQLite file's write lock: no append can commit."""
    conn = sqlite3.connect(database_url.split("///", 1)[1], isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


async def _standalone_recorded(gateway: ServerProcess) -> bool:
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=10) as http:
        listed = (await http.get("/admin/v1/streams", params={"prefix": "mcp."})).json()
    return any(
        s["stream_id"].endswith("._GET_stream") and (s.get("current") or {}).get("tail_seq")
        for s in listed["streams"]
    )


async def _messages_flow_while_the_log_cannot_store(
    gateway: ServerProcess,
    upstream: ServerProcess,
    unavailable: Callable[[], object],
    available: Callable[[], object],
) -> None:
    """Steps 1-2 stored; the log goes away; steps 3-4 arrive without ids; it comes back;
    steps 5-6 and the result are stored again, in a new generation."""
    progress = Progress()
    results = []
    async with (
        mcp_client(f"{gateway.base_url}/mcp") as (session, _, _),
        anyio.create_task_group() as tasks,
    ):

        async def call() -> None:
            results.append(
                await call_progress(session, progress, n=6, pause_at=2, pause_again_at=4, tag="db")
            )

        tasks.start_soon(call)
        with anyio.fail_after(30):
            await progress.at(2).wait()
            # The client's standalone GET stream is recorded too (its priming event): wait
            # for it, so that the only messages the outage leaves unstored are steps 3-4.
            await until(lambda: _standalone_recorded(gateway))
            unavailable()
            await open_gate(upstream.base_url, "db:continue")
            await progress.when(lambda: len(progress.steps) >= 4).wait()
            # Steps 3 and 4 came without an `id:` line: the client's last id stays the
            # stored step 2's (an SSE client keeps its last id across events without one).
            assert set(progress.tokens[3:]) <= {progress.tokens[2]}
            available()
            await open_gate(upstream.base_url, "db:again")
    assert text_of(results[0]) == "counted to 6"
    assert progress.steps == [1, 2, 3, 4, 5, 6]
    ids = seqs_of(list(dict.fromkeys(progress.tokens)))  # each id once, in order
    first, later = ids[0][0], ids[-1][0]
    assert ids[:3] == [(first, 1), (first, 2), (first, 3)]
    assert later != first  # recording resumed in a new generation: the old one lacks 3-4
    assert ids[3:] == [(later, 1), (later, 2), (later, 3)]
    # Every id the client holds is stored.
    async with httpx.AsyncClient(base_url=gateway.base_url) as http:
        for token, seq in ids:
            generation = (await http.get(f"/admin/v1/generations/{token}")).json()
            assert seq <= generation["tail_seq"]
        metrics = (await http.get("/metrics")).text
    unstored = re.search(r"^eventlog_gateway_unstored_messages_total (\S+)$", metrics, re.M)
    assert unstored is not None
    assert unstored.group(1) == "2.0", unstored.group(0)


async def test_sqlite_unavailable_mid_stream_messages_flow_without_ids(tmp_path: Path) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'eventlog.db'}"
    env = {"EVENTLOG_SQLITE_BUSY_TIMEOUT_MS": "200"}
    upstream = python_upstream_process(tmp_path)
    with gateway_before(upstream, tmp_path, database_url, env) as gateway:
        lock = _sqlite_locked(database_url)
        await _messages_flow_while_the_log_cannot_store(
            gateway, upstream, lock.__enter__, lambda: lock.__exit__(None, None, None)
        )


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of the test's own, to stop and start."""
    with private_database() as server:
        yield server


@pytest.mark.postgresql
async def test_postgresql_stopped_mid_stream_messages_flow_without_ids(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    server = private_pg
    upstream = python_upstream_process(tmp_path)
    with gateway_before(upstream, tmp_path, server.url) as gateway:
        await _messages_flow_while_the_log_cannot_store(
            gateway, upstream, lambda: server.stop("fast"), server.start
        )


async def test_shutdown_marks_an_unfinished_recording_upstream_lost(
    upstream_and_gateway: Starter,
) -> None:
    with upstream_and_gateway({"EVENTLOG_GATEWAY_SHUTDOWN_GRACE_SECONDS": "1"}) as (_, gateway):
        progress = Progress()
        with anyio.CancelScope() as client:
            async with (
                mcp_client(f"{gateway.base_url}/mcp") as (session, _, _),
                anyio.create_task_group() as tasks,
            ):
                tasks.start_soon(
                    lambda: call_progress(session, progress, n=5, pause_at=2, tag="bye")
                )
                await progress.at(2).wait()
                await anyio.to_thread.run_sync(gateway.stop)
                client.cancel()
        assert "recording(s) to finish" in gateway.log()
        gateway.start()
        token = progress.tokens[0].rsplit(":", 1)[0]
        async with httpx.AsyncClient(base_url=gateway.base_url) as http:
            generation = (await http.get(f"/admin/v1/generations/{token}")).json()
            page = (await http.get(f"/admin/v1/generations/{token}/events?after=0")).json()
        assert generation["terminal"] is True
        assert '"upstream_lost"' in page["events"][-1]["data"]
        assert '"code":-32011' in page["events"][-1]["data"]


async def test_a_body_over_the_limit_is_refused_before_the_upstream(
    upstream_and_gateway: Starter,
) -> None:
    env = {"EVENTLOG_MAX_BODY_BYTES": "1000", "EVENTLOG_MAX_BODY_BYTES_IN_FLIGHT": "100000"}
    with upstream_and_gateway(env) as (upstream, gateway):
        async with httpx.AsyncClient(timeout=10) as http:
            seen = len((await http.get(f"{upstream.base_url}/test/seen")).json()["headers"])
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y" * 2000}}
            answer = await http.post(f"{gateway.base_url}/mcp", json=body)
            after = len((await http.get(f"{upstream.base_url}/test/seen")).json()["headers"])
        assert (answer.status_code, answer.json()["code"]) == (413, "body_too_large")
        assert after == seen


async def test_a_resume_into_evicted_events_is_reset_visibly(
    upstream_and_gateway: Starter,
) -> None:
    with upstream_and_gateway({"EVENTLOG_DEFAULT_MAX_EVENTS": "3"}) as (_, gateway):
        progress = Progress()
        url = f"{gateway.base_url}/mcp"
        async with mcp_client(url, end_session=False) as (session, session_ids, _):
            await call_progress(session, progress, n=6)
        # Eight events (priming, six steps, the result); three kept: step 1's
        # successors are gone, so resuming from it would skip them.
        with anyio.fail_after(5):
            try:
                async with mcp_client(url, session_id=session_ids[0]) as (again, _, _):
                    await call_progress(again, Progress(), resumption_token=progress.tokens[1])
            except BaseException as failure:  # the failure is what is looked at
                error = _error_of(failure)
            else:
                raise AssertionError("the resume into evicted events did not fail")
        assert error.error.code == -32010
        assert (error.error.data["verdict"], error.error.data["reason"]) == ("reset", "evicted")
        assert error.error.data["discard_client_state"] is True
