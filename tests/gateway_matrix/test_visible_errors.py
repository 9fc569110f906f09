"""Every lost upstream and every refusal is a visible error to each official client (Python,
TypeScript v1 and v2), through one gateway and through two replicas on one database.

Real processes: the gateway (`mcp-eventlog gateway`) on SQLite, and two of them on one
PostgreSQL database behind a switchable TCP proxy (a balancer without affinity: the
client's own reconnect lands on the replica that never read the upstream); upstreams with
no event store of the gateway's — `hostile_upstream.py` in its `ids` mode (event ids, then
the stream ends unanswered; each reconnect refused, answered 404 or with a priming event
only) and the official Python SDK server killed (`kill -9`) mid-call.

Each call ends in the gateway's JSON-RPC error, raised by the client as the call's error,
long before the client's own request timeout: `-32011` (`upstream_lost`) for an upstream
that cannot go on, `-32010` (`invalid` or `reset`) for a claim the log refuses — with its
`data`, which every one of the three clients keeps, TypeScript v1 included (an error on its
first connection or after its own reconnect; a request resumed by a *new* transport is the
v1 SDK's known limit, docs/gateway.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.gateway_matrix.conftest import matrix_gateway
from tests.gateway_matrix.test_unresolvable import CORRUPTIONS, CorruptingProxy
from tests.support.databases import empty_postgres
from tests.support.processes import ServerProcess, free_port
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import CLIENTS, TsClient, mcp_client, progress_of
from tests.support.upstreams import hostile_upstream_process, open_gate, upstream_process

pytestmark = pytest.mark.process

UPSTREAM_LOST = -32011
RESUME_REFUSED = -32010
REQUEST_TIMEOUT = -32001  # the TypeScript SDK's own request timeout
TIMEOUT_MS = 60000  # the clients' own request timeout: far beyond every bound below
SETTINGS = {
    "EVENTLOG_GATEWAY_RECONNECTS": "2",
    "EVENTLOG_GATEWAY_MAX_RETRY_MS": "1000",
    "EVENTLOG_GATEWAY_CONNECT_TIMEOUT_SECONDS": "2",
    # A stale claim of a long call finds its events evicted: the `reset` below.
    "EVENTLOG_DEFAULT_MAX_EVENTS": "4",
}
# The gateway's bound for a lost upstream (RECONNECTS x (retry + one reconnect)), plus the
# client's own reconnect and a loaded two-core machine.
LOST_WITHIN_SECONDS = 2 * (1 + 2) + 6
REFUSED_WITHIN_SECONDS = 6.0


@dataclass
class Upstreams:
    """The module's upstreams and the gateways in front of them, started when first asked."""

    workdir: Path
    stack: ExitStack
    hostile: ServerProcess
    sdk: ServerProcess  # restarted on its port by each test that kills it
    gateways: dict[tuple[str, str], tuple[ServerProcess, ...]] = field(default_factory=dict)

    def of(self, upstream: str, postgres: str | None = None) -> tuple[ServerProcess, ...]:
        """(the gateway,) on SQLite, or (first, second) on the PostgreSQL database
        `postgres`, in front of `upstream` (`hostile` or `sdk`)."""
        topology = "one" if postgres is None else "two"
        key = (topology, upstream)
        if key not in self.gateways:
            up = self.hostile if upstream == "hostile" else self.sdk
            mcp = f"{up.base_url}/mcp"
            if postgres is None:
                database = f"sqlite+aiosqlite:///{self.workdir / f'{upstream}.db'}"
                count = 1
            else:
                database = postgres
                if not any(t == "two" for t, _ in self.gateways):
                    with ThreadPoolExecutor(1) as pool:
                        pool.submit(asyncio.run, empty_postgres(database)).result()
                count = 2
            servers = [matrix_gateway(mcp, database, self.workdir, SETTINGS) for _ in range(count)]
            # Started side by side: each takes seconds to import on a loaded machine.
            with ThreadPoolExecutor(count) as pool:
                list(pool.map(lambda s: s.start(), servers))
            for server in servers:
                self.stack.callback(server.stop)
            self.gateways[key] = tuple(servers)
        return self.gateways[key]


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstreams]:
    workdir = tmp_path_factory.mktemp("visible-errors")
    with ExitStack() as stack:
        hostile = stack.enter_context(hostile_upstream_process(workdir))
        sdk = upstream_process("python", workdir, port=free_port())
        stack.callback(sdk.kill)
        yield Upstreams(workdir, stack, hostile, sdk)


@pytest.fixture
def sdk_upstream(upstreams: Upstreams) -> ServerProcess:
    """The Python SDK upstream, running (a test before may have killed it)."""
    if upstreams.sdk.pid is None:
        upstreams.sdk.start()
    return upstreams.sdk


async def cut_over(run: TsClient, proxy: TcpProxy, port: int, *, within: float) -> float:
    """Fail over: every new connection to `port`, what is open cut; then the call's end is
    awaited (`within` seconds of the cut, with room) and its client's. The seconds from the
    cut to the end."""
    proxy.target_port = port
    cut_at = time.monotonic()
    proxy.cut()
    await run.until(ended, within=within + 20)
    took = time.monotonic() - cut_at
    await run.finished()
    return took


def assert_error(run: TsClient, code: int, **data: Any) -> dict[str, Any]:
    """The call (operation 0) ended in exactly one error of `code` with `data`, never a
    result nor the client's own timeout."""
    errors = run.of(0, "error")
    assert len(errors) == 1, run.lines
    (error,) = errors
    assert error["code"] == code, run.lines
    got = error["data"] or {}
    assert {k: got.get(k) for k in data} == data, run.lines
    assert not run.of(0, "result"), run.lines
    return error


async def until_reconnected(proxy: TcpProxy, port: int) -> None:
    """Once the client's own reconnect has reached the replica on `port`."""
    async with asyncio.timeout(20):
        while port not in proxy.targets:  # noqa: ASYNC110 (the proxy's thread counts them)
            await asyncio.sleep(0.05)


@asynccontextmanager
async def paused_call(
    client: str, url: str, tag: str, *, n: int, pause_at: int
) -> AsyncIterator[TsClient]:
    """`client` calling the SDK upstream's `progress` (`n` steps) through `url`, the upstream
    paused at step `pause_at` (gate `{tag}:continue`): the run, once that step arrived."""
    async with mcp_client(client, url, call({"n": n, "pause_at": pause_at, "tag": tag})) as run:
        await run.until(lambda r: len(r.of(0, "progress")) >= pause_at)
        yield run


def call(arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"op": "call", "arguments": arguments, "timeout_ms": TIMEOUT_MS}]


def ended(run: TsClient) -> bool:
    """The call has its answer or its error."""
    return bool(run.of(0, "error") or run.of(0, "result"))


async def kill_and_wait_for_the_end(run: TsClient, sdk_upstream: ServerProcess) -> float:
    """Kill the SDK upstream mid-call and wait for the call to end and the client to
    finish; the seconds from the kill to the call's end."""
    sdk_upstream.kill()
    killed = time.monotonic()
    await run.until(ended, within=LOST_WITHIN_SECONDS + 20)
    took = time.monotonic() - killed
    await run.finished()
    return took


def assert_lost_at_step_2(run: TsClient, took: float) -> None:
    """The call killed after its second step ended in one `upstream_lost` -32011, within
    `LOST_WITHIN_SECONDS` of the kill."""
    assert_error(run, UPSTREAM_LOST, reason="upstream_lost")
    assert progress_of(run, 0) == [1, 2], run.lines
    assert took <= LOST_WITHIN_SECONDS, f"the error came {took:.1f} s after the kill"


@pytest.mark.parametrize("reconnect", ["refuse", "404", "priming"])
@pytest.mark.parametrize("client", CLIENTS)
async def test_an_upstream_that_cannot_go_on_is_an_error_through_one_gateway(
    upstreams: Upstreams, client: str, reconnect: str
) -> None:
    """Event ids, then the stream ends unanswered and each reconnect is fruitless."""
    (gateway,) = upstreams.of("hostile")
    started = time.monotonic()
    async with mcp_client(
        client, gateway.base_url, call({"mode": "ids", "reconnect": reconnect})
    ) as run:
        await run.finished(within=LOST_WITHIN_SECONDS + 20)
    took = time.monotonic() - started
    assert_error(run, UPSTREAM_LOST, reason="upstream_lost")
    assert progress_of(run, 0) == [1], run.lines
    assert took <= LOST_WITHIN_SECONDS, f"the error came after {took:.1f} s"


@pytest.mark.postgresql
@pytest.mark.parametrize(
    ("client", "reconnect"),
    # Each client and each kind of fruitless reconnect once (all nine are through one gateway).
    [("py", "priming"), ("ts-v1", "refuse"), ("ts-v2", "404")],
)
async def test_an_upstream_that_cannot_go_on_is_an_error_on_the_other_replica(
    upstreams: Upstreams, postgres_database: str, client: str, reconnect: str
) -> None:
    """The first replica reads the upstream and gives up on it; the client's connection is
    cut after the first step and its own reconnect lands on the second replica, which
    relays the first one's -32011 from the log."""
    first, second = upstreams.of("hostile", postgres_database)
    # `retry: 1000`: the first replica waits a second before each reconnect, so the
    # client's reconnect usually reaches the second replica before the error is stored.
    arguments = {"mode": "ids", "reconnect": reconnect, "retry": 1000}
    with TcpProxy(first.port) as proxy:
        async with mcp_client(client, proxy.base_url, call(arguments)) as run:
            await run.until(lambda r: len(r.of(0, "progress")) >= 1)
            took = await cut_over(run, proxy, second.port, within=LOST_WITHIN_SECONDS)
    assert_error(run, UPSTREAM_LOST, reason="upstream_lost")
    assert progress_of(run, 0) == [1], run.lines
    assert second.port in proxy.targets, "the reconnect never reached the second replica"
    assert took <= LOST_WITHIN_SECONDS, f"the error came {took:.1f} s after the cut"


@pytest.mark.parametrize("client", CLIENTS)
async def test_the_sdk_upstream_killed_mid_call_is_an_error_through_one_gateway(
    upstreams: Upstreams, sdk_upstream: ServerProcess, client: str
) -> None:
    (gateway,) = upstreams.of("sdk")
    tag = f"killed-one-{client}"
    async with paused_call(client, gateway.base_url, tag, n=6, pause_at=2) as run:
        took = await kill_and_wait_for_the_end(run, sdk_upstream)
    assert_lost_at_step_2(run, took)


@pytest.mark.postgresql
@pytest.mark.parametrize("client", CLIENTS)
async def test_the_sdk_upstream_killed_mid_call_is_an_error_on_the_other_replica(
    upstreams: Upstreams, sdk_upstream: ServerProcess, postgres_database: str, client: str
) -> None:
    """The client follows the call on the second replica (its own reconnect after a cut)
    when the upstream the first replica reads is killed: the first replica's -32011
    reaches it through the log, live."""
    first, second = upstreams.of("sdk", postgres_database)
    tag = f"killed-two-{client}"
    with TcpProxy(first.port) as proxy:
        async with paused_call(client, proxy.base_url, tag, n=6, pause_at=2) as run:
            proxy.target_port = second.port
            proxy.cut()
            await until_reconnected(proxy, second.port)
            await asyncio.sleep(0.5)  # the reconnect's request is on its way to the log
            took = await kill_and_wait_for_the_end(run, sdk_upstream)
    assert_lost_at_step_2(run, took)


@pytest.mark.postgresql
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_corrupted_claim_on_the_other_replica_is_refused_visibly(
    upstreams: Upstreams, sdk_upstream: ServerProcess, postgres_database: str, client: str
) -> None:
    """The client's own reconnect lands on the second replica with its `Last-Event-ID`
    damaged on the way: the call fails with `-32010` `invalid` there, at once."""
    first, second = upstreams.of("sdk", postgres_database)
    token, reason = CORRUPTIONS["malformed"]
    tag = f"invalid-two-{client}"
    try:
        with CorruptingProxy(first.port) as proxy:
            async with paused_call(client, proxy.base_url, tag, n=6, pause_at=2) as run:
                proxy.corrupt = token.encode()
                took = await cut_over(run, proxy, second.port, within=REFUSED_WITHIN_SECONDS)
    finally:
        await open_gate(sdk_upstream.base_url, f"{tag}:continue")
    assert_error(run, RESUME_REFUSED, verdict="invalid", reason=reason)
    assert took <= REFUSED_WITHIN_SECONDS, f"the refusal came {took:.1f} s after the cut"


@pytest.mark.postgresql
@pytest.mark.parametrize("client", CLIENTS)
async def test_an_evicted_claim_on_the_other_replica_is_refused_visibly(
    upstreams: Upstreams, sdk_upstream: ServerProcess, postgres_database: str, client: str
) -> None:
    """The client's own reconnect lands on the second replica with a stale `Last-Event-ID`
    (its first step's, whose event the log has evicted: 4 kept per stream): the call
    fails with `-32010` `reset` there, at once, never served a gap."""
    first, second = upstreams.of("sdk", postgres_database)
    tag = f"reset-two-{client}"
    try:
        with CorruptingProxy(first.port) as proxy:
            async with paused_call(client, proxy.base_url, tag, n=12, pause_at=8) as run:
                stale = run.of(0, "token")[1]["token"]  # step 1's id (the 0th is priming)
                proxy.corrupt = stale.encode()
                took = await cut_over(run, proxy, second.port, within=REFUSED_WITHIN_SECONDS)
    finally:
        await open_gate(sdk_upstream.base_url, f"{tag}:continue")
    assert_error(run, RESUME_REFUSED, verdict="reset", reason="evicted")
    assert progress_of(run, 0) == list(range(1, 9)), run.lines
    assert took <= REFUSED_WITHIN_SECONDS, f"the refusal came {took:.1f} s after the cut"


V1_RESUME_TIMEOUT_MS = 6000  # the resumed request's own timeout: short, as TS v1 waits for it


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_call_resumed_on_a_new_transport_after_its_upstream_was_killed(
    upstreams: Upstreams, sdk_upstream: ServerProcess, client: str
) -> None:
    """The client leaves a call (its connection closed, the session kept); the upstream is
    killed; a new transport of the session resumes the call with its last token: the
    gateway replays the rest of the recording, ending in `-32011`.

    The Python client and TypeScript v2 fail the resumed request with it at once. The
    TypeScript v1 SDK routes only a *result* on a request resumed by a new transport to
    that request, never an error (the known limit in docs/gateway.md): it reports the
    error to `onerror` at once and the request itself ends by its own timeout."""
    (gateway,) = upstreams.of("sdk")
    tag = f"resumed-{client}"
    program = [
        {"op": "call", "arguments": {"n": 6, "pause_at": 2, "tag": tag}, "drop_after_tokens": 3},
        {"op": "wait"},
        {"op": "resume", "token": {"call": 0, "index": -1}, "timeout_ms": V1_RESUME_TIMEOUT_MS},
    ]
    async with mcp_client(client, gateway.base_url, program) as run:
        await run.until(lambda r: bool(r.of(1, "waiting")))
        sdk_upstream.kill()
        await asyncio.sleep(1)  # the gateway stores its -32011 as the recording's end
        await run.go_on()
        await run.finished()
    (resuming,) = run.of(2, "resuming")
    (error,) = run.of(2, "error")
    assert not run.of(2, "result"), run.lines
    if client == "ts-v1":
        told = run.of(2, "onerror")[0]
        assert str(UPSTREAM_LOST) in told["message"], run.lines
        assert "upstream_lost" in told["message"], run.lines
        assert told["ms"] - resuming["ms"] <= 1000 * REFUSED_WITHIN_SECONDS, run.lines
        assert error["code"] == REQUEST_TIMEOUT, run.lines  # its own timeout, not before
        assert error["ms"] - resuming["ms"] >= V1_RESUME_TIMEOUT_MS, run.lines
        return
    assert error["code"] == UPSTREAM_LOST, run.lines
    assert (error["data"] or {}).get("reason") == "upstream_lost", run.lines
    assert error["ms"] - resuming["ms"] <= 1000 * REFUSED_WITHIN_SECONDS, run.lines
