"""Every refusal of the shared table, seen by each official client.

Real processes: the service, MCP servers with the store (`tests.support.mcp_server`), and
the official clients: the Python SDK's (2.3.0, in this process), TypeScript v1
(`@modelcontextprotocol/sdk` 1.32.2) and v2 (`@modelcontextprotocol/client` 2.4.0, which
negotiates 2025-11-25), both through `tests/support/ts_client`. Each client resumes with
an explicit resumption token that the store must refuse, and the test checks what the
client's request ends with. The automatic reconnection (the server drops the stream, the
transport comes back with `Last-Event-ID`) is covered for every client by
`test_ts_client.py` and `test_end_to_end.py`.

`EXPECTED` is the table of docs/clients-python.md ("What each official client does with a
refusal"): the refusal `-32010` with its reason, at once, except where an SDK cannot show
it — the Python SDK's `JSONRPCError` demands an `id`, so a refusal without one fails the
request at once as a parse error (`-32700`); TypeScript v1 gives an explicitly resumed
request a new id and rewrites only result ids, so it never sees an error for it, and the
request ends by its own timeout (`-32001`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_eventlog_client.mcp import RESUME_REFUSED

from tests.support.deployment import Deployment, service
from tests.support.processes import mcp_server
from tests.support.sdk_session import Progress, call_progress, mcp_client
from tests.support.ts_harness import ts_client

pytestmark = pytest.mark.process

MiB = 1024 * 1024
PARSE_ERROR = -32700
REQUEST_TIMEOUT = -32001
SPOOFED = "Zm9vYmFyYmF6cXV4cXV1eA:1"

# kind -> (verdict, whether the store can name the request the token belongs to)
KINDS: dict[str, tuple[str, bool]] = {
    "superseded": ("reset", True),
    "terminal": ("reset", True),
    "evicted": ("reset", True),
    "not_stored": ("reset", True),
    "beyond_tail": ("invalid", True),
    "cross_session": ("invalid", True),
    "unknown_generation": ("invalid", False),
    "malformed_id": ("invalid", False),
}
CLIENTS = ("python-2.3.0", "ts-v1-1.32.2", "ts-v2-2.4.0")


def expected(client: str, kind: str) -> tuple[int, str | None]:
    """The error code (and refusal reason) the client's request ends with."""
    _verdict, id_known = KINDS[kind]
    if client.startswith("ts-v1"):
        return REQUEST_TIMEOUT, None
    if client.startswith("python") and not id_known:
        return PARSE_ERROR, None
    return RESUME_REFUSED, kind


@dataclass(frozen=True)
class Servers:
    """The MCP servers the kinds need, on one service."""

    main: Deployment
    small: Deployment  # keeps 3 events per generation: older ids are evicted
    strict: Deployment  # stores no message over 64 KiB: a larger one goes out unstored


@pytest.fixture(scope="module")
def servers(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The deployment's MCP server and two more on the same service."""
    workdir = tmp_path_factory.mktemp("refusals")
    with (
        mcp_server(deployment.eventlog, workdir, "--max-events", "3") as small,
        mcp_server(deployment.eventlog, workdir, "--store-max-message-bytes", "65536") as strict,
    ):
        yield Servers(
            deployment,
            Deployment(deployment.eventlog, small),
            Deployment(deployment.eventlog, strict),
        )


@dataclass(frozen=True)
class Case:
    """How to make a token of one kind: where, which call, and what to do with its tokens."""

    server: Callable[[Servers], Deployment]
    arguments: dict[str, Any]
    token: Callable[[Deployment, list[str]], Awaitable[str]]


async def supersede(deployment: Deployment, tokens: list[str]) -> str:
    """Open a new generation of the token's stream, as a failed-over writer would."""
    answer = await service(deployment, "POST", "/v1/resume", {"last_event_id": tokens[1]})
    await service(deployment, "POST", f"/v1/streams/{answer['stream_id']}/generations")
    return tokens[1]


async def terminate(deployment: Deployment, tokens: list[str]) -> str:
    """Finish the token's generation at its current tail."""
    generation = tokens[1].rsplit(":", 1)[0]
    body = {"events": [], "terminal": True}
    await service(deployment, "POST", f"/v1/generations/{generation}/events", body)
    return tokens[1]


async def beyond_tail(_deployment: Deployment, tokens: list[str]) -> str:
    """A seq the generation never reached."""
    return tokens[1].rsplit(":", 1)[0] + ":999"


async def another_session(deployment: Deployment, _tokens: list[str]) -> str:
    """A real token of another session of the same MCP server."""
    theirs = Progress()
    async with mcp_client(deployment.mcp) as (session, _, _):
        await call_progress(session, theirs, n=2, tag="theirs")
    return theirs.tokens[1]


async def second(_deployment: Deployment, tokens: list[str]) -> str:
    """The token of step 1 (evicted on the small server)."""
    return tokens[1]


async def placeholder(_deployment: Deployment, tokens: list[str]) -> str:
    """The id step 2 went out with: over the store's `max_message_bytes`, sent unstored."""
    assert tokens[2].startswith("unstored:"), tokens
    return tokens[2]


def literal(token: str) -> Callable[[Deployment, list[str]], Awaitable[str]]:
    """Always `token`."""

    async def make(_deployment: Deployment, _tokens: list[str]) -> str:
        return token

    return make


CASES: dict[str, Case] = {
    "superseded": Case(lambda s: s.main, {"n": 2}, supersede),
    "terminal": Case(lambda s: s.main, {"n": 2}, terminate),
    "evicted": Case(lambda s: s.small, {"n": 6}, second),
    "not_stored": Case(lambda s: s.strict, {"n": 2, "pad": 100_000, "pad_at": 2}, placeholder),
    "beyond_tail": Case(lambda s: s.main, {"n": 2}, beyond_tail),
    "cross_session": Case(lambda s: s.main, {"n": 2}, another_session),
    "unknown_generation": Case(lambda s: s.main, {"n": 2}, literal(SPOOFED)),
    "malformed_id": Case(lambda s: s.main, {"n": 2}, literal("not an id")),
}


@dataclass(frozen=True)
class Seen:
    """What the client's resumed request ended with, and after how long."""

    code: int | str | None
    reason: str | None
    seconds: float


async def with_python(deployment: Deployment, case: Case, tag: str) -> Seen:
    """The Python SDK's client: a call, then a resume of the token in the same session."""
    async with mcp_client(deployment.mcp) as (session, _, _):
        progress = Progress()
        await call_progress(session, progress, **case.arguments, tag=tag)
        token = await case.token(deployment, progress.tokens)
        started = time.monotonic()
        with anyio.fail_after(30), pytest.raises(MCPError) as refused:
            await call_progress(session, Progress(), resumption_token=token)
    data = refused.value.error.data
    reason = data.get("reason") if isinstance(data, dict) else None
    return Seen(refused.value.code, reason, time.monotonic() - started)


async def with_typescript(deployment: Deployment, case: Case, tag: str, sdk: str) -> Seen:
    """A TypeScript client: a call, then (once the test made the token) a resume of it."""
    program = [
        {"op": "call", "arguments": {**case.arguments, "tag": tag}},
        {"op": "wait"},
        {"op": "resume", "token": {"given": True}, "timeout_ms": 3000},
    ]
    async with ts_client(deployment.mcp, program, sdk=sdk) as client:
        await client.until(lambda c: bool(c.of(1, "waiting")))
        tokens = [line["token"] for line in client.of(0, "token")]
        await client.go_on(await case.token(deployment, tokens))
        await client.finished()
    (started,) = client.of(2, "resuming")
    (error,) = client.of(2, "error")
    data = error.get("data")
    reason = data.get("reason") if isinstance(data, dict) else None
    return Seen(error["code"], reason, (error["ms"] - started["ms"]) / 1000)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("kind", list(KINDS))
async def test_an_explicit_resume_the_store_refuses_ends_the_request_as_the_table_says(
    servers: Servers, client: str, kind: str
) -> None:
    case = CASES[kind]
    deployment = case.server(servers)
    tag = f"refused-{kind}-{client}"
    if client.startswith("python"):
        seen = await with_python(deployment, case, tag)
    else:
        seen = await with_typescript(deployment, case, tag, client.split("-")[1])
    print(f"\nROW {client} {kind}: {seen}")
    code, reason = expected(client, kind)
    assert (seen.code, seen.reason) == (code, reason), seen
