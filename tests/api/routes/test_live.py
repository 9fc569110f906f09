"""Live reads, clause by clause of the contract, through a real SSE parser (httpx-sse) on a
real server process, on SQLite and PostgreSQL.

One server per backend serves the module (short heartbeat, small reader cap); each test
keeps to its own streams. Every ordering across the process boundary is awaited with a
deadline (the next parsed event, a metric reaching a value), never slept for.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.routes.live import EventStreamResponse
from tests.support.processes import running_server
from tests.support.sse import WAIT, Reader, control, reading
from tests.support.writer_calls import append_data as append
from tests.support.writer_calls import open_token as open_generation

pytestmark = pytest.mark.process

READER_CAP = 4
SERVER_ENV = {
    "EVENTLOG_LIVE_HEARTBEAT_SECONDS": "0.3",
    "EVENTLOG_LIVE_RETRY_MS": "250",
    "EVENTLOG_LIVE_MAX_READERS": str(READER_CAP),
    "EVENTLOG_LIVE_MAX_WAIT_SECONDS": "5",
    "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0",
}


@asynccontextmanager
async def own_server(
    database_url: str, tmp_path: Path, **env: str
) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """A server process of the test's own (`SERVER_ENV`, `env` over it) and a client of it."""
    environment = {**SERVER_ENV, "EVENTLOG_DATABASE_URL": database_url, **env}
    with running_server(environment, cwd=tmp_path) as base:
        async with httpx.AsyncClient(base_url=base, timeout=WAIT) as http:
            yield base, http


async def readers_gauge(http: httpx.AsyncClient) -> float:
    metrics = (await http.get("/metrics")).text
    match = re.search(r"^eventlog_live_readers (\S+)$", metrics, re.MULTILINE)
    assert match is not None
    return float(match.group(1))


async def gauge_reaches(http: httpx.AsyncClient, value: float) -> None:
    # Another process's gauge: there is no event to await, so it is asked until it agrees.
    async with asyncio.timeout(WAIT):
        while await readers_gauge(http) != value:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def raw_text(base: str, stream: str, *, until: Callable[[str], bool]) -> str:
    """The response text of a live read, as sent, up to the point `until` says."""
    text = ""
    async with (
        httpx.AsyncClient(base_url=base, timeout=WAIT) as raw,
        raw.stream("GET", f"/v1/streams/{stream}/live") as response,
    ):
        async for chunk in response.aiter_text():
            text += chunk
            if until(text):
                break
    return text


# -- the position -----------------------------------------------------------------------


async def test_no_claim_follows_the_current_generation_from_seq_1(
    base: str, http: httpx.AsyncClient
) -> None:
    token = await open_generation(http, "nothing-claimed")
    await append(http, token, "a", "b")
    async with reading(base, "nothing-claimed") as reader:
        assert reader.status == 200
        first = await reader.take(2)
        assert [(e.id, e.data) for e in first] == [(f"{token}:1", "a"), (f"{token}:2", "b")]
        await append(http, token, "c")
        third = await reader.next()
        assert (third.id, third.data) == (f"{token}:3", "c")
        assert reader.retry == 250  # the response starts with retry:


async def test_the_header_wins_over_the_query_parameter(base: str, http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "positions")
    await append(http, token, "1", "2", "3")
    async with reading(base, "positions", query=f"{token}:1") as by_query:
        assert [e.data for e in await by_query.take(2)] == ["2", "3"]
    async with reading(base, "positions", f"{token}:2", query=f"{token}:0") as by_header:
        assert (await by_header.next()).data == "3"


async def test_data_events_reassemble_exactly_and_name_their_type(
    base: str, http: httpx.AsyncClient
) -> None:
    token = await open_generation(http, "shapes")
    await append(http, token, "line one\nline two\n\nafter a blank", event="progress")
    await append(http, token, "plain", event="message")
    await append(http, token, "")
    async with reading(base, "shapes") as reader:
        shaped, plain, empty = await reader.take(3)
    assert (shaped.event, shaped.data) == ("progress", "line one\nline two\n\nafter a blank")
    assert (plain.event, plain.data) == ("message", "plain")
    assert (empty.event, empty.data) == ("message", "")
    text = await raw_text(base, "shapes", until=lambda text: "data: \n\n" in text)
    # `event:` is left out for a null or `message` type; the `id:` line comes first
    assert f"id: {token}:2\ndata: plain\n\n" in text
    assert f"id: {token}:1\nevent: progress\ndata: line one\ndata: line two\n" in text


# -- invalid: no stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "status", "code"),
    [
        ("not-an-id", 400, "malformed_id"),
        ("AAAAAAAAAAAAAAAAAAAAAA:1", 404, "unknown_generation"),
        ("{other}:1", 409, "cross_stream"),
        ("{token}:9", 409, "beyond_tail"),
    ],
)
async def test_an_invalid_claim_is_an_error_status_not_a_stream(
    http: httpx.AsyncClient, claim: str, status: int, code: str
) -> None:
    token = await open_generation(http, f"invalid-{code}")
    other = await open_generation(http, f"invalid-{code}-other")
    await append(http, token, "x")
    await append(http, other, "y")
    answer = await http.get(
        f"/v1/streams/invalid-{code}/live",
        headers={"Last-Event-ID": claim.format(token=token, other=other)},
    )
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert (answer.json()["code"], answer.json()["verdict"]) == (code, "invalid")


async def test_a_stream_without_a_generation_is_404(http: httpx.AsyncClient) -> None:
    answer = await http.get("/v1/streams/never-opened/live")
    assert (answer.status_code, answer.json()["code"]) == (404, "unknown_stream")


async def test_an_accept_without_event_stream_is_406(http: httpx.AsyncClient) -> None:
    await open_generation(http, "accepting")
    refused = await http.get("/v1/streams/accepting/live", headers={"Accept": "application/json"})
    assert (refused.status_code, refused.json()["code"]) == (406, "not_acceptable")
    zero = await http.get("/v1/streams/accepting/live", headers={"Accept": "text/event-stream;q=0"})
    assert zero.status_code == 406


# -- reset: refuse to splice, then a fresh stream ------------------------------------------


async def test_a_superseded_claim_resets_then_delivers_the_fresh_generation(
    base: str, http: httpx.AsyncClient
) -> None:
    old = await open_generation(http, "retried")
    await append(http, old, "old-1", "old-2")
    new = await open_generation(http, "retried", reason="retry")
    await append(http, new, "new-1")
    async with reading(base, "retried", f"{old}:1") as reader:
        reset, fresh = await reader.take(2)
        assert reset.event == "reset"
        assert control(reset) == {
            "verdict": "reset",
            "reason": "superseded",
            "discard_client_state": True,
            "generation": new,
        }
        assert (fresh.id, fresh.data) == (f"{new}:1", "new-1")
        await append(http, new, "new-2")
        assert (await reader.next()).id == f"{new}:2"


async def test_a_reset_with_nothing_to_deliver_waits_for_the_next_generation(
    base: str, http: httpx.AsyncClient
) -> None:
    token = await open_generation(http, "evicting", max_events=2)
    await append(http, token, "1", "2", "3", "4")
    async with reading(base, "evicting", f"{token}:1") as reader:
        reset = await reader.next()
        assert (reset.event, control(reset)["reason"], control(reset)["generation"]) == (
            "reset",
            "evicted",
            None,
        )
        with pytest.raises(TimeoutError):
            await reader.next(within=1.0)  # nothing until a new generation is opened
        fresh = await open_generation(http, "evicting")
        await append(http, fresh, "again")
        event = await reader.next()
        assert (event.id, event.data) == (f"{fresh}:1", "again")


# -- while following ------------------------------------------------------------------------


async def test_following_through_a_supersede(base: str, http: httpx.AsyncClient) -> None:
    first = await open_generation(http, "failover")
    async with reading(base, "failover") as reader:
        await append(http, first, "a")
        assert (await reader.next()).id == f"{first}:1"
        second = await open_generation(http, "failover", reason="failover")
        reset = await reader.next()
        assert (reset.event, control(reset)["reason"]) == ("reset", "superseded")
        assert control(reset)["generation"] == second
        await append(http, second, "b")
        assert (await reader.next()).id == f"{second}:1"


async def test_following_through_an_eviction(base: str, http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "overrun", max_events=2)
    async with reading(base, "overrun") as reader:
        await append(http, token, "1", "2", "3", "4", "5")  # seqs 1-3 are gone at once
        reset = await reader.next()
        assert (reset.event, control(reset)["reason"]) == ("reset", "evicted")


async def test_following_through_a_purge(base: str, http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "purged")
    async with reading(base, "purged") as reader:
        await append(http, token, "a")
        assert (await reader.next()).data == "a"
        assert (await http.delete("/admin/v1/streams/purged")).status_code == 200
        reset = await reader.next()
        assert (reset.event, control(reset)["reason"]) == ("reset", "expired")


async def test_a_terminal_generation_ends_the_stream(base: str, http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "finishing")
    async with reading(base, "finishing") as reader:
        await append(http, token, "working")
        await append(http, token, "result", terminal=True)
        events = await reader.take(3)
        assert [e.data for e in events[:2]] == ["working", "result"]
        assert events[2].event == "end"
        assert control(events[2]) == {"generation": token, "terminal_seq": 2}
        async with asyncio.timeout(WAIT):
            await reader.ended.wait()  # and the service closes the response


async def test_heartbeats_keep_an_idle_stream_open(base: str, http: httpx.AsyncClient) -> None:
    await open_generation(http, "idle")
    text = await raw_text(base, "idle", until=lambda text: text.count(": keep-alive\n") >= 2)
    assert text == "retry: 250\n: keep-alive\n: keep-alive\n"


# -- the same decision as a resume -----------------------------------------------------------


async def test_a_live_claim_is_audited_and_counted_like_a_resume(
    base: str, http: httpx.AsyncClient
) -> None:
    old = await open_generation(http, "audited")
    await open_generation(http, "audited")
    async with reading(base, "audited", f"{old}:0") as reader:
        assert (await reader.next()).event == "reset"
    decisions = (await http.get("/admin/v1/decisions", params={"stream_id": "audited"})).json()
    assert [(d["verdict"], d["reason"]) for d in decisions["decisions"]] == [
        ("reset", "superseded")
    ]
    metrics = (await http.get("/metrics")).text
    assert 'eventlog_resume_verdicts_total{reason="superseded",verdict="reset"}' in metrics


# -- resources ----------------------------------------------------------------------------------


async def test_past_the_reader_cap_is_503_and_a_gone_reader_frees_its_place(
    base: str, http: httpx.AsyncClient
) -> None:
    await open_generation(http, "crowded")
    await gauge_reaches(http, 0)
    readers = [reading(base, "crowded") for _ in range(READER_CAP)]
    opened: list[Reader] = [await r.__aenter__() for r in readers]
    try:
        assert all(r.status == 200 for r in opened)
        await gauge_reaches(http, READER_CAP)
        refused = await http.get("/v1/streams/crowded/live")
        assert (refused.status_code, refused.json()["code"]) == (503, "too_many_readers")
        assert "retry-after" in refused.headers
    finally:
        for r in readers:
            await r.__aexit__(None, None, None)
    # A reader that went away is noticed within seconds and its place is free again.
    await gauge_reaches(http, 0)
    async with reading(base, "crowded") as again:
        assert again.status == 200


async def test_a_client_that_leaves_frees_its_slot_at_once(
    database_url: str, tmp_path: Path
) -> None:
    # The heartbeat is a minute away: only noticing the client leave can free the slot
    # (and the watch) before it, not a send to the gone client failing.
    heartbeat = {"EVENTLOG_LIVE_HEARTBEAT_SECONDS": "60"}
    async with own_server(database_url, tmp_path, **heartbeat) as (base, http):
        await open_generation(http, "leaving")
        async with httpx.AsyncClient(base_url=base, timeout=WAIT) as raw:
            async with raw.stream("GET", "/v1/streams/leaving/live") as response:
                assert (await anext(response.aiter_text())).startswith("retry: ")
                await gauge_reaches(http, 1)
            left = time.monotonic()  # the connection is closed here
        await gauge_reaches(http, 0)
        freed = time.monotonic() - left
    assert freed < 3, f"the slot was freed {freed:.2f}s after the client left"


async def test_the_slot_is_freed_at_once_under_asgi_2_4_too() -> None:
    # Starlette's StreamingResponse stops listening for `http.disconnect` under ASGI 2.4
    # and notices a gone client only when a send fails: an idle reader never sends.
    idle, closed, bodies_ended = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def bodies() -> AsyncIterator[bytes]:
        try:
            yield b": an idle reader\n"
            await asyncio.Event().wait()  # nothing happens: not even a heartbeat
            yield b"never"
        finally:
            bodies_ended.set()

    async def receive() -> dict[str, Any]:
        await idle.wait()
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("body") == b": an idle reader\n":
            idle.set()  # the client goes once the reader idles

    response = EventStreamResponse(bodies(), closed.set, 250)
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    async with asyncio.timeout(WAIT):
        await response(scope, receive, send)
    assert closed.is_set()
    assert bodies_ended.is_set()
    assert [m.get("body") for m in sent[1:]] == [b"retry: 250\n", b": an idle reader\n"]


async def test_the_response_is_an_unbuffered_event_stream(
    base: str, http: httpx.AsyncClient
) -> None:
    await open_generation(http, "headers")
    async with http.stream("GET", "/v1/streams/headers/live") as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        assert "content-length" not in response.headers
        assert (await anext(response.aiter_text())).startswith("retry: 250\n")


# -- long-poll ----------------------------------------------------------------------------------


async def test_long_poll_waits_for_an_append(http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "polled")
    await append(http, token, "1")
    waiting = asyncio.create_task(
        http.get(f"/v1/generations/{token}/events", params={"after": 1, "wait": 4})
    )
    await asyncio.sleep(0.2)  # let the request start waiting; the answer would be the same
    await append(http, token, "2")
    page = (await waiting).json()
    assert [e["data"] for e in page["events"]] == ["2"]
    assert page["superseded"] is False


async def test_long_poll_answers_empty_when_nothing_comes(http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "quiet")
    page = (await http.get(f"/v1/generations/{token}/events", params={"wait": 0.3})).json()
    assert (page["events"], page["superseded"], page["terminal"]) == ([], False, False)


async def test_long_poll_answers_at_once_when_superseded(http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "fenced")
    await open_generation(http, "fenced")
    page = (await http.get(f"/v1/generations/{token}/events", params={"wait": 5})).json()
    assert (page["events"], page["superseded"]) == ([], True)


async def test_long_poll_over_the_limit_is_422(http: httpx.AsyncClient) -> None:
    token = await open_generation(http, "impatient")
    answer = await http.get(f"/v1/generations/{token}/events", params={"wait": 6})
    assert (answer.status_code, answer.json()["code"]) == (422, "validation_error")


def test_the_module_server_env_is_documented() -> None:
    configuration = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    assert all(f"`{name}`" in configuration for name in SERVER_ENV)


async def test_a_connection_ends_after_its_lifetime_and_the_reader_continues_exactly(
    database_url: str, tmp_path: Path
) -> None:
    async with own_server(database_url, tmp_path, EVENTLOG_LIVE_MAX_SECONDS="1.5") as (base, http):
        token = await open_generation(http, "polling")
        await append(http, token, "1", "2")
        async with reading(base, "polling") as first:
            assert [e.data for e in await first.take(2)] == ["1", "2"]
            async with asyncio.timeout(WAIT):
                await first.ended.wait()  # ended by the service: no `end`, no error
            assert first.events.empty()
        await append(http, token, "3")
        async with reading(base, "polling", first.last_id) as second:
            assert [(e.id, e.data) for e in await second.take(1)] == [(f"{token}:3", "3")]


async def test_an_empty_last_event_id_header_is_no_claim(
    base: str, http: httpx.AsyncClient
) -> None:
    token = await open_generation(http, "blank-claim")
    await append(http, token, "from the start")
    async with reading(base, "blank-claim", "") as reader:
        assert (await reader.next()).id == f"{token}:1"
