"""A claim that names no generation (malformed, or a token the log does not know) while a
call of the session is unanswered: the official clients fail that call at once with the
gateway's refusal (`-32010`, `data: {verdict: "invalid", reason, discard_client_state}`)
instead of waiting for their own timeout on a problem+json they cannot route.

Real processes: the Python SDK upstream (no event store), the gateway, the official
clients (Python, TypeScript v1 and v2). The corrupted token reaches the gateway two ways:
a new transport resuming with it, and the client's own reconnect, whose `Last-Event-ID` a
proxy rewrites on the way (a token damaged in transit or in the client's storage).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from typing import Any

import pytest

from tests.gateway_matrix.conftest import Gateway, GatewayFactory
from tests.support.tcp_proxy import TcpProxy
from tests.support.ts_harness import TsClient, mcp_client
from tests.support.upstreams import open_gate

pytestmark = pytest.mark.process

RESUME_REFUSED = -32010
VISIBLE_WITHIN_MS = 2500  # "at once", with room for a loaded 2-core machine
TIMEOUT_MS = 15000  # the clients' own request timeout: far beyond the bound above
CORRUPTIONS = {
    "malformed": ("not a token\u2603", "malformed_id"),
    "unknown": (f"{secrets.token_urlsafe(16)}:3", "unknown_generation"),
}


@pytest.fixture
def gateway(request: pytest.FixtureRequest, gateways: GatewayFactory) -> Gateway:
    return gateways(request, "sqlite", "python")


def assert_refused(run: TsClient, op: int, reason: str, since_ms: int) -> None:
    """Operation `op` failed with the refusal naming `reason`, within the bound of
    `since_ms`, and got nothing of any stream."""
    errors = run.of(op, "error")
    assert len(errors) == 1, run.lines
    (error,) = errors
    assert error["code"] == RESUME_REFUSED, run.lines
    data = error["data"] or {}
    assert data.get("verdict") == "invalid", run.lines
    assert data.get("reason") == reason, run.lines
    assert data.get("discard_client_state") is False, run.lines
    assert error["ms"] - since_ms <= VISIBLE_WITHIN_MS, run.lines
    assert not run.of(op, "result"), run.lines


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
@pytest.mark.parametrize("client", ["py", "ts-v2"])
async def test_a_resume_with_a_corrupted_token_fails_the_unanswered_call_at_once(
    gateway: Gateway, client: str, kind: str
) -> None:
    """A call paused upstream, its client gone; a new transport of the session resumes
    with a corrupted token: the resumed request fails with the refusal at once.

    (TypeScript v1 is not here: SDK 1.x routes only a *result* on a resumed request to the
    new request's id, never an error, so no answer of the gateway can settle that request;
    its own reconnect below is settled.)"""
    token, reason = CORRUPTIONS[kind]
    tag = f"resume-{client}-{kind}"
    program = [
        {"op": "call", "arguments": {"n": 6, "pause_at": 2, "tag": tag}, "drop_after_tokens": 3},
        {"op": "wait"},
        {"op": "resume", "token": {"given": True}, "timeout_ms": TIMEOUT_MS},
    ]
    try:
        async with mcp_client(client, gateway.url, program) as run:
            await run.until(lambda r: bool(r.of(1, "waiting")))
            await run.go_on(token)
            await run.finished()
    finally:
        await open_gate(gateway.upstream.base_url, f"{tag}:continue")
    (resuming,) = run.of(2, "resuming")
    assert_refused(run, 2, reason, resuming["ms"])
    assert not run.of(2, "progress"), run.lines


class CorruptingProxy(TcpProxy):
    """A `TcpProxy` that, once `corrupt` is set, rewrites the `Last-Event-ID` of every
    request it relays to that value."""

    corrupt: bytes | None = None

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pump(reader, up_writer, True), self._pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            for w in pair:
                w.transport.abort()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rewrite: bool = False
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                if rewrite and self.corrupt is not None:
                    chunk = re.sub(
                        rb"(?im)^(last-event-id:)[^\r\n]*", rb"\1 " + self.corrupt, chunk
                    )
                writer.write(chunk)
                await writer.drain()


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
@pytest.mark.parametrize("client", ["py", "ts-v1", "ts-v2"])
async def test_the_clients_own_reconnect_with_a_corrupted_token_fails_the_call_at_once(
    gateway: Gateway, client: str, kind: str
) -> None:
    """The connection of a call in flight is cut; the client reconnects by itself with
    its last id, damaged on the way: the call fails with the refusal at once, never by
    the client's own timeout."""
    token, reason = CORRUPTIONS[kind]
    tag = f"own-{client}-{kind}"
    program: list[dict[str, Any]] = [
        {"op": "call", "arguments": {"n": 6, "pause_at": 2, "tag": tag}, "timeout_ms": TIMEOUT_MS}
    ]
    try:
        with CorruptingProxy(gateway.server.port) as proxy:
            async with mcp_client(client, proxy.base_url, program) as run:
                await run.until(lambda r: len(r.of(0, "progress")) >= 2)
                proxy.corrupt = token.encode()
                cut_at = run.of(0, "progress")[-1]["ms"]
                assert proxy.cut() >= 1
                await run.finished()
    finally:
        await open_gate(gateway.upstream.base_url, f"{tag}:continue")
    assert_refused(run, 0, reason, cut_at)
