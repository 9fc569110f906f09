"""A live reader's position, as a hostile or unlucky reader gives it, on a real server
process, on SQLite and PostgreSQL.

- Two `Last-Event-ID` headers are refused (400 `bad_request`), never one of
  them silently taken.
- A reader with no position gets the stream's current generation from seq 1 whatever its
  state: a finished one whole and then `end` (not a `terminal` reset naming nothing and
  then silence for ever), with no verdict recorded.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.support.sse import WAIT, control, reading
from tests.support.writer_calls import append_data as append
from tests.support.writer_calls import open_token as open_generation

pytestmark = pytest.mark.process

SERVER_ENV = {
    "EVENTLOG_LIVE_HEARTBEAT_SECONDS": "0.3",
    "EVENTLOG_LIVE_RETRY_MS": "250",
    "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0",
}


# -- two Last-Event-ID headers --


@pytest.mark.parametrize("second", ["", "x:1"])
async def test_two_last_event_id_headers_are_refused(http: httpx.AsyncClient, second: str) -> None:
    token = await open_generation(http, "two-claims")
    await append(http, token, "a", "b")
    headers = [("Last-Event-ID", f"{token}:1"), ("Last-Event-ID", second or f"{token}:0")]
    async with http.stream("GET", "/v1/streams/two-claims/live", headers=headers) as answer:
        assert answer.status_code == 400, "two claims were taken as one"
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert json.loads(await answer.aread())["code"] == "bad_request"
    # one header is still a claim, as before
    async with reading(str(http.base_url), "two-claims", f"{token}:1") as reader:
        assert (await reader.next()).id == f"{token}:2"


# -- no position on a finished stream --


async def decisions_of(http: httpx.AsyncClient, stream: str) -> list[Any]:
    answer = await http.get("/admin/v1/decisions", params={"stream_id": stream})
    decisions: list[Any] = answer.json()["decisions"]
    return decisions


async def test_no_position_on_a_finished_stream_gets_it_whole_then_end(
    base: str, http: httpx.AsyncClient
) -> None:
    token = await open_generation(http, "finished-before")
    await append(http, token, "one", "two")
    await append(http, token, "done", terminal=True)
    async with reading(base, "finished-before") as reader:
        assert reader.status == 200
        events = await reader.take(4)
        assert [(e.id, e.data) for e in events[:3]] == [
            (f"{token}:1", "one"),
            (f"{token}:2", "two"),
            (f"{token}:3", "done"),
        ]
        assert events[3].event == "end"
        assert control(events[3]) == {"generation": token, "terminal_seq": 3}
        async with asyncio.timeout(WAIT):
            await reader.ended.wait()
    assert await decisions_of(http, "finished-before") == []  # no position: nothing decided


async def test_no_position_on_an_empty_finished_generation_is_end_at_once(
    base: str, http: httpx.AsyncClient
) -> None:
    token = await open_generation(http, "finished-empty")
    await append(http, token, terminal=True)
    async with reading(base, "finished-empty") as reader:
        event = await reader.next()
        assert (event.event, control(event)) == ("end", {"generation": token, "terminal_seq": 0})
        async with asyncio.timeout(WAIT):
            await reader.ended.wait()


async def test_no_position_is_not_audited_but_a_claim_still_is(
    base: str, http: httpx.AsyncClient
) -> None:
    token = await open_generation(http, "unclaimed-audit")
    await append(http, token, "x")
    async with reading(base, "unclaimed-audit") as reader:
        assert (await reader.next()).id == f"{token}:1"
    assert await decisions_of(http, "unclaimed-audit") == []
    async with reading(base, "unclaimed-audit", f"{token}:1") as claimed:
        await append(http, token, "y")
        assert (await claimed.next()).id == f"{token}:2"
    verdicts = [d["verdict"] for d in await decisions_of(http, "unclaimed-audit")]
    assert verdicts == ["resume"]
