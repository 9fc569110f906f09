"""The gateway end to end: the official Python SDK server (no event store) behind it, the
official Python client in front, both databases. Orderings across processes are awaited
(progress callbacks, gates of the upstream), never slept for."""

from __future__ import annotations

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.gateway.clients import (
    CuttingTransport,
    Progress,
    call_progress,
    mcp_client,
    progress_of,
    seqs_of,
    text_of,
)
from tests.gateway.conftest import Pair
from tests.support.mcp_raw import initialize
from tests.support.upstreams import open_gate

pytestmark = pytest.mark.process

RESUME_REFUSED = -32010


async def admin(pair: Pair, path: str) -> object:
    async with httpx.AsyncClient(base_url=pair.gateway.base_url) as http:
        answer = await http.get(f"/admin/v1{path}")
        answer.raise_for_status()
        return answer.json()


async def test_a_call_is_recorded_and_relayed_with_the_logs_ids(pair: Pair) -> None:
    progress = Progress()
    async with mcp_client(pair.mcp) as (session, _, _):
        result = await call_progress(session, progress, n=5)
    assert text_of(result) == "counted to 5"
    assert progress.steps == [1, 2, 3, 4, 5]
    # One generation: the gateway's priming event (1), five notifications, the result (7).
    ids = seqs_of(progress.tokens)
    token = ids[0][0]
    assert ids == [(token, seq) for seq in range(1, 8)]
    generation = await admin(pair, f"/generations/{token}")
    assert isinstance(generation, dict)
    assert generation["terminal"] is True
    assert generation["tail_seq"] == 7
    assert generation["stream_id"].startswith("mcp.")
    page = await admin(pair, f"/generations/{token}/events?after=0")
    assert isinstance(page, dict)
    events = page["events"]
    assert events[0]["event"] == "priming"
    assert events[0]["data"] == ""
    assert [e["event"] for e in events[1:]] == ["message"] * 6
    assert '"counted to 5"' in events[-1]["data"]


async def test_each_recorded_stream_starts_with_retry_and_a_priming_event(pair: Pair) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        init = await _initialize(http, pair)
        assert init.status_code == 200
        assert init.text.startswith("retry: 200\n")
        assert init.headers["mcp-session-id"]
        lines = init.text.split("\n")
        assert lines[1].startswith("id: ")
        assert lines[2] == "data: "
        # The upstream sent no ids of its own; every id shown is the log's.
        ids = [line[4:] for line in lines if line.startswith("id: ")]
        assert len(ids) == 2
        assert all(i.count(":") == 1 for i in ids)


async def test_a_cut_stream_is_resumed_by_the_clients_own_reconnect_exactly_once(
    pair: Pair,
) -> None:
    progress = Progress()
    transport = CuttingTransport(after=4)  # priming + steps 1-3, then the connection drops
    async with mcp_client(pair.mcp, transport=transport) as (session, _, _):
        with anyio.fail_after(30):
            result = await call_progress(session, progress, n=8, delay=0.05)
    assert transport.cut
    assert text_of(result) == "counted to 8"
    assert progress.steps == [1, 2, 3, 4, 5, 6, 7, 8]
    ids = seqs_of(progress.tokens)
    assert ids == [(ids[0][0], seq) for seq in range(1, 11)]


async def test_an_explicit_resume_on_a_new_transport_goes_on_live(pair: Pair) -> None:
    first = Progress()
    session_ids: list[str] = []
    with anyio.CancelScope() as first_client:
        async with (
            mcp_client(pair.mcp, end_session=False) as (session, session_ids, _),
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(lambda: call_progress(session, first, n=6, pause_at=3, tag="moved"))
            await first.at(3).wait()
            first_client.cancel()  # the client goes away; the gateway keeps recording
    token = first.tokens[3]
    second = Progress()
    results = []
    with anyio.fail_after(20):
        async with (
            mcp_client(pair.mcp, session_id=session_ids[0]) as (session, _, notifications),
            anyio.create_task_group() as tasks,
        ):

            async def resume() -> None:
                results.append(await call_progress(session, second, resumption_token=token))

            tasks.start_soon(resume)
            await open_gate(pair.upstream.base_url, "moved:continue")
    assert text_of(results[0]) == "counted to 6"
    assert progress_of(notifications) == [4, 5, 6]
    generation = token.rsplit(":", 1)[0]
    assert second.tokens == [f"{generation}:{seq}" for seq in (5, 6, 7, 8)]


async def test_a_stream_resumed_after_its_result_replays_the_rest_again_and_again(
    pair: Pair,
) -> None:
    progress = Progress()
    session_ids: list[str]
    async with mcp_client(pair.mcp, end_session=False) as (session, session_ids, _):
        await call_progress(session, progress, n=4)
    token = progress.tokens[2]  # after step 2
    for _ in range(3):
        again = Progress()
        with anyio.fail_after(10):
            async with mcp_client(pair.mcp, session_id=session_ids[0]) as (s, _, notes):
                result = await call_progress(s, again, resumption_token=token)
        assert text_of(result) == "counted to 4"
        assert progress_of(notes) == [3, 4]
        assert again.tokens == progress.tokens[3:]


async def _refused(pair: Pair, session_id: str, claim: str) -> BaseException:
    """What an explicit resume from `claim` ends with (it must end, and quickly)."""
    with anyio.fail_after(5):
        try:
            async with mcp_client(pair.mcp, session_id=session_id) as (session, _, _):
                await call_progress(session, Progress(), resumption_token=claim)
        except BaseException as error:
            return error
    raise AssertionError(f"the resume from {claim!r} did not fail")


def _refusal_of(error: BaseException) -> MCPError:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(error)
    return error


async def test_each_refusal_fails_the_request_visibly_and_at_once(pair: Pair) -> None:
    mine, theirs = Progress(), Progress()
    async with (
        mcp_client(pair.mcp, end_session=False) as (session, my_ids, _),
        mcp_client(pair.mcp, end_session=False) as (other, _, _),
    ):
        await call_progress(session, mine, n=2)
        await call_progress(other, theirs, n=2)
    token = mine.tokens[0].rsplit(":", 1)[0]
    # Another session's token: invalid / cross_session.
    error = _refusal_of(await _refused(pair, my_ids[0], theirs.tokens[1]))
    assert error.error.code == RESUME_REFUSED
    assert error.error.data["reason"] == "cross_session"
    # Beyond the tail: invalid / beyond_tail, for the request the stream names.
    error = _refusal_of(await _refused(pair, my_ids[0], f"{token}:99"))
    assert (error.error.code, error.error.data["reason"]) == (RESUME_REFUSED, "beyond_tail")
    assert error.error.data["verdict"] == "invalid"
    # Unknown token and malformed id: no request to name; the request still fails at once.
    await _refused(pair, my_ids[0], "AAAAAAAAAAAAAAAAAAAAAA:3")
    await _refused(pair, my_ids[0], "not an id")
    # Purged (expired): reset, discard what you hold.
    stream = await admin(pair, f"/generations/{token}")
    assert isinstance(stream, dict)
    async with httpx.AsyncClient(base_url=pair.gateway.base_url) as http:
        (await http.delete(f"/admin/v1/streams/{stream['stream_id']}")).raise_for_status()
    error = _refusal_of(await _refused(pair, my_ids[0], mine.tokens[1]))
    assert error.error.code == RESUME_REFUSED
    assert error.error.data["verdict"] == "reset"
    assert error.error.data["reason"] == "expired"
    assert error.error.data["discard_client_state"] is True
    async with httpx.AsyncClient(timeout=10) as http:
        metrics = (await http.get(f"{pair.gateway.base_url}/metrics")).text
    for verdict, reason in (("invalid", "cross_session"), ("reset", "expired")):
        assert f'eventlog_gateway_resumes_total{{reason="{reason}",verdict="{verdict}"}}' in metrics
        assert f'eventlog_resume_verdicts_total{{reason="{reason}",verdict="{verdict}"}}' in metrics
    # The cross-session claim is in the decision log like any decision, filterable by it.
    listed = await admin(pair, "/decisions?reason=cross_session")
    assert isinstance(listed, dict)
    (entry,) = [d for d in listed["decisions"] if d["last_event_id"] == theirs.tokens[1]]
    assert (entry["verdict"], entry["reason"]) == ("invalid", "cross_session")
    assert entry["generation"] == theirs.tokens[1].rsplit(":", 1)[0]


async def test_refusals_without_a_request_are_problems(pair: Pair) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        for claim, status, code in (
            ("not an id", 400, "malformed_id"),
            ("AAAAAAAAAAAAAAAAAAAAAA:3", 404, "unknown_generation"),
        ):
            answer = await http.get(
                pair.mcp, headers={"last-event-id": claim, "accept": "text/event-stream"}
            )
            assert answer.status_code == status
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert answer.json()["code"] == code
            assert answer.json()["verdict"] == "invalid"


async def test_a_2026_07_28_client_passes_through_unrecorded(pair: Pair) -> None:
    from mcp.client.client import Client

    before = await admin(pair, "/stats")
    async with Client(pair.mcp, mode="2026-07-28") as client:
        result = await client.call_tool("progress", {"n": 3})
    assert text_of(result) == "counted to 3"
    assert await admin(pair, "/stats") == before
    async with httpx.AsyncClient(timeout=10) as http:
        await http.post(
            pair.mcp,
            headers={
                "mcp-protocol-version": "2026-07-28",
                "last-event-id": "AAAAAAAAAAAAAAAAAAAAAA:3",
                "accept": "application/json, text/event-stream",
            },
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
        seen = (await http.get(f"{pair.upstream.base_url}/test/seen")).json()["headers"]
        metrics = (await http.get(f"{pair.gateway.base_url}/metrics")).text
    assert "mcp-protocol-version" in seen[-1]
    assert "last-event-id" not in seen[-1]
    counted = 'eventlog_gateway_requests_total{method="POST",revision="2026-07-28",status="200"}'
    assert counted in metrics


async def test_a_foreign_host_or_origin_is_refused_before_the_upstream(pair: Pair) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        seen = len((await http.get(f"{pair.upstream.base_url}/test/seen")).json()["headers"])
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        host = await http.post(pair.mcp, headers={"host": "evil.example"}, json=body)
        origin = await http.post(pair.mcp, headers={"origin": "http://evil.example"}, json=body)
        after = len((await http.get(f"{pair.upstream.base_url}/test/seen")).json()["headers"])
    assert (host.status_code, host.json()["code"]) == (421, "host_not_allowed")
    assert (origin.status_code, origin.json()["code"]) == (403, "origin_not_allowed")
    assert after == seen


async def test_authorization_is_forwarded_but_never_stored_or_logged(pair: Pair) -> None:
    secret = "Bearer upstream-secret-7f3a9c"
    progress = Progress()
    async with mcp_client(pair.mcp, headers={"authorization": secret}) as (session, _, _):
        await call_progress(session, progress, n=2)
    async with httpx.AsyncClient(timeout=10) as http:
        seen = (await http.get(f"{pair.upstream.base_url}/test/seen")).json()["headers"]
    assert "authorization" in seen[-1]
    token = progress.tokens[0].rsplit(":", 1)[0]
    page = await admin(pair, f"/generations/{token}/events?after=0")
    generation = await admin(pair, f"/generations/{token}")
    decisions = await admin(pair, "/decisions")
    for record in (page, generation, decisions):
        assert "upstream-secret" not in str(record)
    assert "upstream-secret" not in pair.gateway.log()
    if pair.database_url.startswith("sqlite"):
        path = pair.database_url.split("///", 1)[1]
        for suffix in ("", "-wal"):
            stored = await anyio.Path(path + suffix).read_bytes()
            assert b"upstream-secret" not in stored


async def _initialize(http: httpx.AsyncClient, pair: Pair) -> httpx.Response:
    """A raw 2025-11-25 `initialize` (request id 1); the gateway's response to it."""
    return await http.post(
        pair.mcp,
        headers={"accept": "application/json, text/event-stream"},
        json=initialize("raw", rid=1),
    )


async def _initialized(http: httpx.AsyncClient, pair: Pair) -> dict[str, str]:
    """A raw 2025-11-25 session; the headers its later requests carry."""
    init = await _initialize(http, pair)
    headers = {
        "mcp-session-id": init.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    await http.post(
        pair.mcp,
        headers={**headers, "accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    return headers


async def _first_id(http: httpx.AsyncClient, pair: Pair, headers: dict[str, str]) -> str:
    """Open the standalone stream, read its first id (the priming event's), leave."""
    async with http.stream(
        "GET", pair.mcp, headers={**headers, "accept": "text/event-stream"}
    ) as stream:
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("id: "):
                return line[4:]
    raise AssertionError("no id on the standalone stream")


async def test_a_standalone_stream_reconnect_gets_a_fresh_recorded_stream(pair: Pair) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        headers = await _initialized(http, pair)
        first = await _first_id(http, pair, headers)
        # The client left: that recording is finished. Its reconnect gets what it missed
        # (nothing) and a fresh standalone stream of the upstream, in a new generation.
        with anyio.fail_after(10):
            second = await _first_id(http, pair, {**headers, "last-event-id": first})
        assert second.rsplit(":", 1)[0] != first.rsplit(":", 1)[0]
        stream = await admin(pair, f"/generations/{first.rsplit(':', 1)[0]}")
        assert isinstance(stream, dict)
        assert stream["stream_id"].endswith("._GET_stream")
        assert stream["terminal"] is True
        # A token of another session on it is refused, not answered with a stream.
        other = await _initialized(http, pair)
        answer = await http.get(
            pair.mcp, headers={**other, "last-event-id": first, "accept": "text/event-stream"}
        )
        assert (answer.status_code, answer.json()["code"]) == (409, "cross_session")
