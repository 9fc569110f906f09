"""The official TypeScript MCP clients against a Python MCP server using the store.

Both generations run every test: v1 (`@modelcontextprotocol/sdk` 1.32.2) and v2
(`@modelcontextprotocol/client` 2.4.0, negotiating 2025-11-25).

Real processes: the event-log service (SQLite or PostgreSQL), the test MCP server
(`tests.support.mcp_server`, wired as the docs say) and the TS client harness
(`tests/support/ts_client`). Every ordering is awaited on the harness's output or on the
MCP server's gates, never slept for. Requests time out after 20 s in the harness, so a
request that hangs (what these defects did) fails as a timeout (-32001), not as a refusal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterator

import httpx
import pytest
from mcp_eventlog_client.mcp import RESUME_REFUSED

from tests.support.deployment import Deployment, open_gate, service
from tests.support.mcp_server import result_text
from tests.support.processes import mcp_server
from tests.support.ts_harness import Line, TsClient, ts_client

pytestmark = pytest.mark.process

MiB = 1024 * 1024


@pytest.fixture(params=["v1", "v2"])
def sdk(request: pytest.FixtureRequest) -> str:
    """The TypeScript SDK generation driving the test."""
    name: str = request.param
    return name


def only(lines: list[Line]) -> Line:
    """The one line there must be."""
    assert len(lines) == 1, lines
    return lines[0]


def tokens_of(client: TsClient, op: int) -> list[str]:
    """The resumption tokens operation `op` was handed, in order."""
    return [line["token"] for line in client.of(op, "token")]


def has_tokens(op: int, count: int) -> Callable[[TsClient], bool]:
    """Whether operation `op` holds `count` tokens."""
    return lambda client: len(client.of(op, "token")) >= count


async def test_a_finished_stream_resumes_again_and_again(deployment: Deployment, sdk: str) -> None:
    call = {"n": 5, "close_at": 2, "tag": f"ts-again-{sdk}", "replay_after": "done"}
    again = {"op": "resume", "token": {"call": 0, "index": 1}}
    program = [{"op": "call", "arguments": call}, again, again, again]
    async with ts_client(deployment.mcp, program, sdk=sdk) as client:
        await client.finished()
    # The server closed the stream at step 2; the transport resumed it by itself.
    assert only(client.of(0, "result"))["text"] == "counted to 5"
    assert [line["progress"] for line in client.of(0, "progress")] == [1, 2, 3, 4, 5]
    # Then three new clients resume the finished stream from step 1's token: each gets
    # the result again (TS 1.32.2 reports no tokens on an explicit resumption).
    for op in (1, 2, 3):
        assert only(client.of(op, "result"))["text"] == "counted to 5"
        assert client.of(op, "error") == []
    # Nothing was superseded: the stream still has its one generation, and resumes.
    token = tokens_of(client, 0)[1]
    answer = await service(deployment, "POST", "/v1/resume", {"last_event_id": token})
    assert (answer["verdict"], len(answer["events"])) == ("resume", 5)
    stream = await service(deployment, "GET", f"/v1/streams/{answer['stream_id']}")
    assert stream["generations"] == 1


async def supersede(deployment: Deployment, token: str) -> None:
    """Open a new generation of the token's stream, as a failed-over writer would."""
    answer = await service(deployment, "POST", "/v1/resume", {"last_event_id": token})
    await service(deployment, "POST", f"/v1/streams/{answer['stream_id']}/generations")


async def terminate(deployment: Deployment, token: str) -> None:
    """Finish the token's generation at its current tail."""
    generation = token.rsplit(":", 1)[0]
    body = {"events": [], "terminal": True}
    await service(deployment, "POST", f"/v1/generations/{generation}/events", body)


@pytest.mark.parametrize("spoil", [supersede, terminate], ids=["superseded", "terminal"])
async def test_a_refused_resume_fails_the_request_at_once(
    deployment: Deployment, spoil: Callable[[Deployment, str], Awaitable[None]], sdk: str
) -> None:
    tag = f"ts-refused-{spoil.__name__}-{sdk}"  # gates are the server's: one per test
    call = {"n": 4, "pause_at": 2, "close_on_gate": True, "tag": tag}
    async with ts_client(deployment.mcp, [{"op": "call", "arguments": call}], sdk=sdk) as client:
        await client.until(has_tokens(0, 3))  # the priming event's, steps 1 and 2
        await spoil(deployment, tokens_of(client, 0)[2])
        # The server drops the stream; the transport reconnects with Last-Event-ID.
        await open_gate(deployment, f"{tag}:close")
        await client.until(lambda c: bool(c.of(0, "error")))
        await open_gate(deployment, f"{tag}:continue")
        await client.finished()
    error = only(client.of(0, "error"))
    assert error["code"] == RESUME_REFUSED, error
    assert error["data"]["verdict"] == "reset"
    assert (
        error["data"]["reason"]
        == {"supersede": "superseded", "terminate": "terminal"}[spoil.__name__]
    )
    assert [line["progress"] for line in client.of(0, "progress")] == [1, 2]


async def test_an_explicit_resume_refusal_reaches_v1_only_as_onerror(
    deployment: Deployment,
) -> None:
    """TS 1.32.2 gives a resumed request a new id and rewrites only *result* ids to it.

    A refusal carries the id of the request whose stream the token names; a new client
    that resumes with `resumptionToken` waits under another id, so the refusal reaches its
    `onerror` ("unknown message ID"), and the request itself ends by its timeout. (v2
    rewrites error ids too, since typescript-sdk PR #1390, as the Python SDK's client does:
    their resumed request fails at once; `test_refusals.py` holds every kind.)
    """
    sdk = "v1"
    program = [
        {"op": "call", "arguments": {"n": 2, "tag": "ts-explicit"}},
        {"op": "wait"},
        {"op": "resume", "token": {"call": 0, "index": 1}, "timeout_ms": 3000},
    ]
    async with ts_client(deployment.mcp, program, sdk=sdk) as client:
        await client.until(lambda c: bool(c.of(1, "waiting")))
        await supersede(deployment, tokens_of(client, 0)[1])
        await client.go_on()
        await client.finished()
    assert only(client.of(0, "result"))["text"] == "counted to 2"
    refusals = [line for line in client.of(2, "onerror") if str(RESUME_REFUSED) in line["message"]]
    assert len(refusals) == 1
    assert "unknown message ID" in refusals[0]["message"]
    assert "superseded" in refusals[0]["message"]
    assert only(client.of(2, "error"))["code"] == -32001  # the request's own timeout


async def test_a_multi_mib_result_is_resumed_whole_after_a_drop(
    deployment: Deployment, sdk: str
) -> None:
    tag = f"ts-large-{sdk}"
    call = {"n": 3, "pause_at": 2, "tag": tag, "replay_after": "done", "result_bytes": 5 * MiB}
    program = [
        {"op": "call", "arguments": call, "drop_after_tokens": 3},
        {"op": "resume", "token": {"call": 0, "index": -1}},
        {"op": "resume", "token": {"call": 0, "index": 0}},
    ]
    async with ts_client(deployment.mcp, program, sdk=sdk) as client:
        await client.until(lambda c: bool(c.of(0, "dropped")))
        await open_gate(deployment, f"{tag}:continue")
        await client.finished()
    # Dropped on step 2's token: its progress may or may not have been handled first.
    assert [line["progress"] for line in client.of(0, "progress")] in ([1], [1, 2])
    whole = only(client.of(1, "result"))
    expected = hashlib.sha256(result_text(5 * MiB).encode()).hexdigest()
    assert (whole["length"], whole["sha256"]) == (5 * MiB, expected)
    again = only(client.of(2, "result"))
    assert (again["length"], again["sha256"]) == (whole["length"], whole["sha256"])
    # In the service the result is several events: parts of at most 1 MiB.
    generation = tokens_of(client, 0)[0].rsplit(":", 1)[0]
    types, after = [], 0
    while after is not None:
        page = await service(
            deployment, "GET", f"/v1/generations/{generation}/events?after={after}"
        )
        types += [event["event"] for event in page["events"]]
        after = page["next_after"]
    parts = [kind for kind in types if kind.startswith("message-part")]
    assert len(parts) >= 5
    assert parts[-1] == f"message-part {len(parts)}/{len(parts)}"


@pytest.fixture(scope="module")
def oversized_deployment(
    deployment: Deployment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """An MCP server whose store sends events of up to 8 MiB: over the service's 1 MiB."""
    workdir = tmp_path_factory.mktemp("e2e-oversized")
    with mcp_server(deployment.eventlog, workdir, "--store-max-event-bytes", str(8 * MiB)) as url:
        yield Deployment(deployment.eventlog, url)


async def test_a_failed_store_keeps_the_session_and_refuses_its_resume(
    oversized_deployment: Deployment, sdk: str
) -> None:
    deployment = oversized_deployment
    tag = f"ts-413-{sdk}"
    padded = {"n": 3, "pad": 2 * MiB, "pad_at": 2, "pause_at": 2, "close_on_gate": True}
    program = [
        {"op": "call", "arguments": {**padded, "tag": tag}},
        {"op": "call", "arguments": {"n": 2, "tag": f"ts-after-413-{sdk}"}},
    ]
    before = await store_failures(deployment)
    async with ts_client(deployment.mcp, program, sdk=sdk) as client:
        await client.until(lambda c: len(c.of(0, "progress")) == 2)
        await open_gate(deployment, f"{tag}:close")
        await client.until(lambda c: bool(c.of(0, "error")))
        await open_gate(deployment, f"{tag}:continue")
        await client.finished()
    # Step 2 (2 MiB, refused 413 by the service) still reached the client live; the stream
    # was then dropped and the resume from its id refused, visibly.
    assert [line["progress"] for line in client.of(0, "progress")] == [1, 2]
    error = only(client.of(0, "error"))
    assert (error["code"], error["data"]["reason"]) == (RESUME_REFUSED, "not_stored")
    # The session goes on.
    assert only(client.of(1, "result"))["text"] == "counted to 2"
    after = await store_failures(deployment)
    assert set(after) == {"event_too_large"}
    assert after["event_too_large"] == before.get("event_too_large", 0) + 1


async def store_failures(deployment: Deployment) -> dict[str, int]:
    """The MCP server's store failures by cause (the server serves every SDK's run)."""
    async with httpx.AsyncClient() as http:
        failures: dict[str, int] = (await http.get(f"{deployment.mcp}/test/store-failures")).json()
    return failures
