"""The gateway in front of unmodified MCP servers, driven by the official clients.

Real processes throughout: `mcp-eventlog gateway --upstream URL` (SQLite or PostgreSQL),
an upstream with no event store (tests/support/upstreams: the Python SDK's server, the
TypeScript SDK's v1 and v2, FastMCP) and a client (the Python SDK's, TypeScript v1 and v2,
tests/support/ts_harness.py), optionally a TCP proxy that cuts connections mid-stream.

Within the CI budget: every upstream x client pairing runs the plain call once on SQLite;
the full set of cases runs on one pairing per database (`FULL`); the PostgreSQL half is
marked `postgresql`. `EVENTLOG_SOAK=1` runs every case on every pairing of both.
Orderings are awaited on the clients' output (progress lines, tokens), never slept for.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from _pytest.mark import ParameterSet

from tests.gateway_matrix.conftest import Gateway, GatewayFactory
from tests.support.soak import soak_enabled
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import CLIENTS, Line, TsClient, mcp_client, progress_of
from tests.support.upstreams import UPSTREAMS

pytestmark = pytest.mark.process

FULL = {"sqlite": ("ts-v2", "ts-v1"), "postgresql": ("fastmcp", "py")}
"""The pairing (upstream, client) that runs every case, per database."""
RESET = -32010  # the contract's refusal code for `reset` and request-known `invalid`
VISIBLE_WITHIN_MS = 2500  # "~1 s", with room for a loaded 2-core machine


def _param(db: str, upstream: str, client: str) -> ParameterSet:
    marks = [pytest.mark.postgresql] if db == "postgresql" else []
    return pytest.param(db, upstream, client, marks=marks, id=f"{db}-{upstream}-{client}")


def _everything() -> list[ParameterSet]:
    dbs = ("sqlite", "postgresql")
    return [_param(d, u, c) for d in dbs for u in UPSTREAMS for c in CLIENTS]


def plain_cases() -> list[ParameterSet]:
    """Every pairing on SQLite, the full pairing on PostgreSQL (everything under soak)."""
    if soak_enabled():
        return _everything()
    return [_param("sqlite", u, c) for u in UPSTREAMS for c in CLIENTS] + [
        _param("postgresql", *FULL["postgresql"])
    ]


def full_cases() -> list[ParameterSet]:
    """One pairing per database (every pairing of both under soak)."""
    if soak_enabled():
        return _everything()
    return [_param(db, *pairing) for db, pairing in FULL.items()]


ARGS = "db,upstream,client"


@pytest.fixture
def gateway_of(
    request: pytest.FixtureRequest, gateways: GatewayFactory
) -> Any:  # a (db, upstream, **env) -> Gateway callable bound to this test's request
    if request.node.callspec.params.get("db") == "postgresql":
        # Resolved here, before the test's event loop runs (its set-up calls asyncio.run).
        request.getfixturevalue("postgres_database")

    def get(db: str, upstream: str, **env: str) -> Gateway:
        return gateways(request, db, upstream, **env)

    return get


def result_of(run: TsClient, op: int) -> Line:
    """Operation `op`'s one result (failing with every line when there is none)."""
    results = run.of(op, "result")
    assert len(results) == 1, run.lines
    return results[0]


def progress_count(op: int, count: int) -> Any:
    """A check: operation `op` has seen `count` progress notifications."""
    return lambda run: len(run.of(op, "progress")) >= count


@pytest.mark.parametrize(ARGS, plain_cases())
async def test_progress_then_result(gateway_of: Any, db: str, upstream: str, client: str) -> None:
    gateway = gateway_of(db, upstream)
    async with mcp_client(client, gateway.url, [{"op": "call", "arguments": {"n": 8}}]) as run:
        await run.finished()
    assert progress_of(run, 0) == list(range(1, 9)), run.lines
    assert result_of(run, 0)["text"] == "counted to 8"
    # Every id the client was shown is the log's (`<token>:<seq>`), never the upstream's.
    tokens = [line["token"] for line in run.of(0, "token")]
    assert tokens, run.lines
    assert all(":" in token for token in tokens), tokens


@pytest.mark.parametrize(ARGS, full_cases())
async def test_a_client_side_cut_then_an_explicit_resume_on_a_new_transport(
    gateway_of: Any, db: str, upstream: str, client: str
) -> None:
    """The client drops its connection mid-stream; a new transport resumes with the last
    token it held: every notification exactly once across the two, in order, then the result.
    The gateway went on reading the upstream meanwhile."""
    gateway = gateway_of(db, upstream)
    program = [
        {"op": "call", "arguments": {"n": 12, "delay": 0.15}, "drop_after_tokens": 5},
        {"op": "resume", "token": {"call": 0, "index": -1}},
    ]
    async with mcp_client(client, gateway.url, program) as run:
        await run.finished()
    assert run.of(0, "dropped"), run.lines
    before, after = progress_of(run, 0), progress_of(run, 1)
    assert before + after == list(range(1, 13)), run.lines
    assert after, "the resume replayed nothing"
    assert result_of(run, 1)["text"] == "counted to 12"


@pytest.mark.parametrize(ARGS, full_cases())
async def test_a_proxy_cut_then_the_clients_own_reconnect(
    gateway_of: Any, db: str, upstream: str, client: str
) -> None:
    """A TCP proxy between client and gateway resets the connection mid-stream; the
    client's transport reconnects by itself with Last-Event-ID and gets the rest, once."""
    gateway = gateway_of(db, upstream)
    program = [{"op": "call", "arguments": {"n": 12, "delay": 0.06}, "timeout_ms": 30000}]
    with TcpProxy(gateway.server.port) as proxy:
        async with mcp_client(client, proxy.base_url, program) as run:
            await run.until(progress_count(0, 4))
            assert proxy.cut() >= 1
            await run.finished()
    assert progress_of(run, 0) == list(range(1, 13)), run.lines
    assert result_of(run, 0)["text"] == "counted to 12"
    assert proxy.accepted > 2, "the client never reconnected"  # session, call, reconnect


@pytest.mark.parametrize(ARGS, full_cases())
async def test_a_stream_resumed_after_its_result_replays_the_rest_again_and_again(
    gateway_of: Any, db: str, upstream: str, client: str
) -> None:
    gateway = gateway_of(db, upstream)
    program = [
        {"op": "call", "arguments": {"n": 4}},
        {"op": "resume", "token": {"call": 0, "index": 1}},
        {"op": "resume", "token": {"call": 0, "index": 1}},
    ]
    async with mcp_client(client, gateway.url, program) as run:
        await run.finished()
    assert progress_of(run, 0) == [1, 2, 3, 4]
    assert result_of(run, 0)["text"] == "counted to 4"
    # Token 0 is the gateway's priming event, token 1 step 1's: the rest is 2..4 and the result.
    for op in (1, 2):
        assert progress_of(run, op) == [2, 3, 4], run.lines
        assert result_of(run, op)["text"] == "counted to 4"


def _spoil(kind: str, token: str) -> str:
    generation, _, seq = token.rpartition(":")
    if kind == "unknown":
        return f"{secrets.token_hex(len(generation) // 2 or 8)}:{seq}"
    if kind == "beyond_tail":
        return f"{generation}:{int(seq) + 1000}"
    if kind == "malformed":
        return "not a token\u2603"
    raise ValueError(kind)


def assert_visible_refusal(run: TsClient, op: int) -> None:
    """Operation `op` failed visibly (an error, or the v1 client's `onerror`) within ~1 s
    of resuming, and nothing of any stream was delivered to it."""
    (resuming,) = run.of(op, "resuming")
    seen = sorted(run.of(op, "error") + run.of(op, "onerror"), key=lambda line: line["ms"])
    assert seen, f"the refusal was never seen: {run.lines}"
    assert seen[0]["ms"] - resuming["ms"] <= VISIBLE_WITHIN_MS, run.lines
    assert not run.of(op, "progress"), run.lines
    assert not run.of(op, "result"), run.lines


REFUSAL_PROGRAM = [
    {"op": "call", "arguments": {"n": 3}},
    {"op": "wait"},
    {"op": "resume", "token": {"given": True}, "timeout_ms": 4000},
]


@pytest.mark.parametrize("kind", ["unknown", "beyond_tail", "malformed"])
@pytest.mark.parametrize(ARGS, full_cases())
async def test_a_spoilt_token_fails_the_resume_visibly(
    gateway_of: Any,
    db: str,
    upstream: str,
    client: str,
    kind: str,
) -> None:
    gateway = gateway_of(db, upstream)
    async with mcp_client(client, gateway.url, REFUSAL_PROGRAM) as run:
        await run.until(lambda r: bool(r.of(1, "waiting")))
        await run.go_on(_spoil(kind, run.of(0, "token")[-1]["token"]))
        await run.finished()
    assert result_of(run, 0)["text"] == "counted to 3"
    assert_visible_refusal(run, 2)


@pytest.mark.parametrize(ARGS, full_cases())
async def test_another_sessions_token_fails_the_resume_and_shows_nothing_of_it(
    gateway_of: Any, db: str, upstream: str, client: str
) -> None:
    gateway = gateway_of(db, upstream)
    async with mcp_client(client, gateway.url, [{"op": "call", "arguments": {"n": 3}}]) as first:
        await first.finished()
    foreign = first.of(0, "token")[1]["token"]
    async with mcp_client(client, gateway.url, REFUSAL_PROGRAM) as run:
        await run.until(lambda r: bool(r.of(1, "waiting")))
        await run.go_on(foreign)
        await run.finished()
    assert_visible_refusal(run, 2)


@pytest.mark.parametrize(ARGS, full_cases())
async def test_an_evicted_claim_is_refused_as_reset(
    gateway_of: Any, db: str, upstream: str, client: str
) -> None:
    """A gateway keeping 4 events per stream: a resume from step 1 of a 12-step call
    finds its events evicted, and the client is told (reset), not served a gap."""
    gateway = gateway_of(db, upstream, EVENTLOG_DEFAULT_MAX_EVENTS="4")
    program = [
        {"op": "call", "arguments": {"n": 12}},
        {"op": "resume", "token": {"call": 0, "index": 1}, "timeout_ms": 4000},
    ]
    async with mcp_client(client, gateway.url, program) as run:
        await run.finished()
    assert result_of(run, 0)["text"] == "counted to 12"
    assert_visible_refusal(run, 1)
    errors = run.of(1, "error") + run.of(1, "onerror")
    assert any(
        line.get("code") == RESET or str(RESET) in str(line.get("message")) for line in errors
    ), errors
