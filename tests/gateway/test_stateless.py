"""The gateway in front of a stateless upstream (no `Mcp-Session-Id`): every recorded
response has a stream of its own, so concurrent calls with the same request id — every
client's first call is `1` — neither supersede each other nor share resumability, and a
client of another credential cannot resume a stream that is not its own.

Real processes: the official Python SDK server run stateless
(`tests.gateway.stateless_upstream`), the gateway, on SQLite and PostgreSQL; the calls
are raw HTTP (the SSE parsed by httpx-sse), as a stateless client sends them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from tests.gateway.conftest import Pair, pair_fixture
from tests.support.processes import ServerProcess, free_port
from tests.support.upstreams import open_gate

pytestmark = pytest.mark.process

PROTOCOL = "2025-11-25"
REQUEST_ID = 7  # every call of the test uses it: the ids collide on purpose
STEPS = 6


def stateless_upstream(workdir: Path) -> ServerProcess:
    """`stateless_upstream.py` as a process, not yet started."""
    port = free_port()
    argv = ["-m", "tests.gateway.stateless_upstream", "--port", str(port)]
    return ServerProcess.program(argv, port=port, log_path=workdir / "upstream.log")


# A stateless upstream and a gateway in front of it, for the module.
stateless = pair_fixture(stateless_upstream, "stateless")


@dataclass
class Seen:
    """What one call's SSE response delivered: the messages and their ids, in order."""

    ids: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        return [
            int(m["params"]["progress"])
            for m in self.messages
            if m.get("method") == "notifications/progress"
        ]

    @property
    def answer(self) -> dict[str, Any] | None:
        answers = [m for m in self.messages if "result" in m or "error" in m]
        return answers[-1] if answers else None


def headers(credential: str | None, **extra: str) -> dict[str, str]:
    sent = {"mcp-protocol-version": PROTOCOL, **extra}
    if credential is not None:
        sent["authorization"] = credential
    return sent


async def read(
    http: httpx.AsyncClient, method: str, url: str, seen: Seen, stop: int, **kw: Any
) -> None:
    """Read an SSE response into `seen` until it ends or has `stop` ids; then leave."""
    async with aconnect_sse(http, method, url, **kw) as source:
        assert source.response.status_code == 200, await source.response.aread()
        async for event in source.aiter_sse():
            if event.id:
                seen.ids.append(event.id)
            if event.data:
                seen.messages.append(json.loads(event.data))
            if len(seen.ids) >= stop:
                return


async def call(http: httpx.AsyncClient, mcp: str, tag: str, credential: str | None) -> Seen:
    """A `progress` call with the colliding request id, read up to step 2 (the upstream
    waits at step 3 on the gate `<tag>:continue`); the client then leaves."""
    body = {
        "jsonrpc": "2.0",
        "id": REQUEST_ID,
        "method": "tools/call",
        "params": {
            "name": "progress",
            "arguments": {"n": STEPS, "pause_at": 3, "tag": tag},
            "_meta": {"progressToken": tag},
        },
    }
    seen = Seen()
    sent = headers(credential, accept="application/json, text/event-stream")
    # The priming event, then steps 1..3 (the upstream pauses after sending step 3).
    await read(http, "POST", mcp, seen, 4, json=body, headers=sent)
    return seen


async def resume(http: httpx.AsyncClient, mcp: str, last: str, credential: str | None) -> Seen:
    seen = Seen()
    sent = headers(credential, accept="text/event-stream", **{"last-event-id": last})
    await read(http, "GET", mcp, seen, 1_000, headers=sent)
    return seen


@pytest.mark.parametrize("credential", [None, "Bearer shared-by-both"])
async def test_concurrent_calls_with_one_request_id_each_resume_their_own_stream(
    stateless: Pair, credential: str | None
) -> None:
    """Two clients (no session; anonymous, or sharing one credential) call at once with
    the same request id and leave mid-call: each resumes its own call — every step once,
    its own result — and neither stream was superseded by the other."""
    tags = [f"{'anon' if credential is None else 'shared'}-{n}" for n in (1, 2)]
    async with httpx.AsyncClient(timeout=30) as http:
        first, second = await asyncio.gather(
            *(call(http, stateless.mcp, tag, credential) for tag in tags)
        )
        for seen in (first, second):
            assert seen.steps == [1, 2, 3], seen
        tokens = {seen.ids[0].rsplit(":", 1)[0] for seen in (first, second)}
        assert len(tokens) == 2, "both calls were recorded into one generation"
        for tag in tags:
            await open_gate(stateless.upstream.base_url, f"{tag}:continue")
        rests = await asyncio.gather(
            *(resume(http, stateless.mcp, seen.ids[-1], credential) for seen in (first, second))
        )
    for rest in rests:
        assert rest.steps == [4, 5, 6], rest
        answer = rest.answer
        assert answer is not None, rest
        assert answer["id"] == REQUEST_ID, rest
        assert answer["result"]["content"][0]["text"] == f"counted to {STEPS}", rest


async def test_another_credential_cannot_resume_a_sessionless_stream(stateless: Pair) -> None:
    """A third client under another credential, holding the first one's event id, is
    refused (`invalid`/`cross_session`) and shown nothing of that stream; an anonymous
    stream's ids are refused to a bearer of any credential, and the other way round."""
    async with httpx.AsyncClient(timeout=30) as http:
        owned = await call(http, stateless.mcp, "owner-a", "Bearer a")
        anonymous = await call(http, stateless.mcp, "owner-anon", None)
        await open_gate(stateless.upstream.base_url, "owner-a:continue")
        await open_gate(stateless.upstream.base_url, "owner-anon:continue")
        for last, credential in (
            (owned.ids[-1], "Bearer b"),
            (owned.ids[-1], None),
            (anonymous.ids[-1], "Bearer a"),
        ):
            refused = await resume(http, stateless.mcp, last, credential)
            assert refused.steps == [], refused
            answer = refused.answer
            assert answer is not None, refused
            assert answer["error"]["code"] == -32010, refused
            assert answer["error"]["data"]["reason"] == "cross_session", refused
        # Its owner still resumes it.
        rest = await resume(http, stateless.mcp, owned.ids[-1], "Bearer a")
        assert rest.steps == [4, 5, 6], rest
