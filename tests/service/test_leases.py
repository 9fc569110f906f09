"""Writer leases through the real server process, on both databases (CONTRACT.md, "Writer
leases, pipelined writers and abandoned generations").

A lease of 1 s and a sweep every 0.5 s keep every wait short: a lapsed generation is
recorded abandoned within lease + sweep, and every bound below is that plus slack for a
loaded machine (`SLACK`), never less.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.live_readers import LiveReader
from tests.support.writer_calls import append, open_generation, resume

pytestmark = pytest.mark.process

LEASE = 1.0
SWEEP = 0.5
CATCHUP = 1.5
SLACK = 3.0  # a loaded, shared machine: scheduling, not the service's bound
SERVER_ENV = {
    "EVENTLOG_LEASE_SWEEP_SECONDS": str(SWEEP),
    "EVENTLOG_RESUME_CATCHUP_MS": str(int(CATCHUP * 1000)),
    "EVENTLOG_LIVE_HEARTBEAT_SECONDS": "60",
    "EVENTLOG_LOG_LEVEL": "warning",
}


async def _stream(http: httpx.AsyncClient, stream_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/streams/{stream_id}")
    assert response.status_code == 200, response.text
    current: dict[str, Any] = response.json()["current"]
    return current


async def _abandoned_within(http: httpx.AsyncClient, stream_id: str, bound: float) -> float:
    started = time.monotonic()
    while not (await _stream(http, stream_id))["abandoned"]:
        assert time.monotonic() - started < bound, "not recorded abandoned in time"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def test_the_generation_shows_its_lease_and_window(http: httpx.AsyncClient) -> None:
    gen = await open_generation(http, "lease-shown", lease_seconds=7, pipeline=3)
    assert (gen["lease_seconds"], gen["pipeline"], gen["abandoned"]) == (7, 3, False)
    assert gen["lease_expires_at"] is not None
    assert gen["abandoned_at"] is None
    default = await open_generation(http, "lease-default")
    assert (default["lease_seconds"], default["pipeline"]) == (30, 0)


@pytest.mark.parametrize(
    "body",
    [
        {"lease_seconds": 0},
        {"lease_seconds": 86_401},
        {"lease_seconds": "5"},
        {"pipeline": -1},
        {"pipeline": 10_001},
    ],
)
async def test_out_of_bounds_lease_or_window_is_422(
    http: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    response = await http.post("/v1/streams/lease-bad/generations", json=body)
    assert (response.status_code, response.json()["code"]) == (422, "validation_error")


async def test_a_lapsed_lease_is_swept_then_appends_and_renewals_are_409_abandoned(
    http: httpx.AsyncClient,
) -> None:
    token = (await open_generation(http, "lapse", lease_seconds=1))["generation"]
    await append(http, token, ["a", "b"])
    waited = await _abandoned_within(http, "lapse", LEASE + SWEEP + SLACK)
    current = await _stream(http, "lapse")
    assert current["abandoned_at"] is not None
    assert current["tail_seq"] == 2
    refused = await http.post(f"/v1/generations/{token}/events", json={"events": [{"data": "c"}]})
    assert (refused.status_code, refused.json()["code"]) == (409, "abandoned")
    renewal = await http.post(f"/v1/generations/{token}/lease")
    assert (renewal.status_code, renewal.json()["code"]) == (409, "abandoned")
    # A verified retry of what was stored is still answered: the events are there.
    retry = await http.post(
        f"/v1/generations/{token}/events",
        json={"events": [{"data": "a"}, {"data": "b"}], "first_seq": 1},
    )
    assert (retry.status_code, retry.json()["duplicate"]) == (200, True)
    assert waited < LEASE + SWEEP + SLACK


async def test_renewal_answers(http: httpx.AsyncClient) -> None:
    token = (await open_generation(http, "renew-answers", lease_seconds=5))["generation"]
    renewed = await http.post(f"/v1/generations/{token}/lease")
    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["generation"] == token
    assert renewed.json()["lease_seconds"] == 5
    unknown = await http.post("/v1/generations/AAAAAAAAAAAAAAAAAAAAAA/lease")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_generation")
    await append(http, token, ["end"], terminal=True)
    finished = await http.post(f"/v1/generations/{token}/lease")
    assert (finished.status_code, finished.json()["code"]) == (409, "terminal")
    old = (await open_generation(http, "renew-answers-2", lease_seconds=5))["generation"]
    await open_generation(http, "renew-answers-2")
    fenced = await http.post(f"/v1/generations/{old}/lease")
    assert (fenced.status_code, fenced.json()["code"]) == (409, "superseded")


async def test_an_idle_generation_whose_writer_renews_is_never_abandoned(
    http: httpx.AsyncClient,
) -> None:
    token = (await open_generation(http, "idle-renewed", lease_seconds=1))["generation"]
    await append(http, token, ["first"])
    deadline = time.monotonic() + 3 * LEASE + SWEEP
    while time.monotonic() < deadline:  # no events for 3 x lease; renewed every lease / 4
        renewed = await http.post(f"/v1/generations/{token}/lease")
        assert renewed.status_code == 200, renewed.text
        await asyncio.sleep(LEASE / 4)
    assert (await _stream(http, "idle-renewed"))["abandoned"] is False
    await append(http, token, ["still mine"])


async def test_rows_4_4a_4b_through_the_server(http: httpx.AsyncClient) -> None:
    token = (await open_generation(http, "rows", pipeline=3, lease_seconds=30))["generation"]
    await append(http, token, ["1", "2"])
    # Row 4: beyond tail + pipeline.
    beyond = await resume(http, f"{token}:6", "rows")
    assert (beyond["verdict"], beyond["reason"]) == ("invalid", "beyond_tail")
    # Row 4a, caught up: the writer stores seq 3 and 4 while the resume waits.
    waiting = asyncio.ensure_future(resume(http, f"{token}:4", "rows"))
    await asyncio.sleep(0.3)
    await append(http, token, ["3", "4"])
    caught = await waiting
    assert (caught["verdict"], caught["reason"], caught["events"]) == ("resume", "ok", [])
    # Row 4a, still short when the wait is over: lost_tail.
    started = time.monotonic()
    short = await resume(http, f"{token}:5", "rows")
    assert (short["verdict"], short["reason"]) == ("reset", "lost_tail")
    assert short["discard_client_state"] is True
    assert CATCHUP - 0.1 <= time.monotonic() - started < CATCHUP + SLACK


async def test_row_4a_superseded_while_waiting_is_lost_tail_at_once(
    http: httpx.AsyncClient,
) -> None:
    token = (await open_generation(http, "rows-fenced", pipeline=3))["generation"]
    await append(http, token, ["1"])
    started = time.monotonic()
    waiting = asyncio.ensure_future(resume(http, f"{token}:2", "rows-fenced"))
    await asyncio.sleep(0.3)
    await open_generation(http, "rows-fenced", reason="failover")
    answer = await waiting
    assert (answer["verdict"], answer["reason"]) == ("reset", "lost_tail")
    assert time.monotonic() - started < CATCHUP  # told by the wake-up, not the deadline


async def test_row_4b_an_abandoned_current_generation_resets(http: httpx.AsyncClient) -> None:
    token = (await open_generation(http, "rows-abandoned", lease_seconds=1))["generation"]
    await append(http, token, ["1", "2"])
    await asyncio.sleep(LEASE + 0.2)  # lapsed: the resume sees it, swept yet or not
    answer = await resume(http, f"{token}:1", "rows-abandoned")
    assert (answer["verdict"], answer["reason"], answer["generation"]) == (
        "reset",
        "abandoned",
        None,
    )
    # Once a newer generation supersedes it, row 5 decides.
    await open_generation(http, "rows-abandoned")
    later = await resume(http, f"{token}:1", "rows-abandoned")
    assert later["reason"] == "superseded"


async def test_a_live_reader_is_told_abandoned_then_gets_the_next_generation(
    http: httpx.AsyncClient, base: str
) -> None:
    token = (await open_generation(http, "live-abandoned", lease_seconds=1))["generation"]
    await append(http, token, ["one"])
    opened = time.monotonic()
    reader = LiveReader(base, "live-abandoned").start()
    try:
        await reader.wait_until(lambda r: any(e.event == "reset" for e in r.events))
        told = time.monotonic() - opened
        reset = next(e for e in reader.events if e.event == "reset").control()
        assert (reset["reason"], reset["generation"]) == ("abandoned", None)
        assert told < LEASE + SWEEP + SLACK
        assert [e.data for e in reader.data()] == ["one"]
        fresh = (await open_generation(http, "live-abandoned"))["generation"]
        await append(http, fresh, ["two"])
        await reader.wait_until(lambda r: len(r.data()) == 2)
        assert reader.data()[-1].token == fresh
    finally:
        await reader.stop()


async def test_a_long_poll_is_answered_when_its_generation_is_abandoned(
    http: httpx.AsyncClient,
) -> None:
    token = (await open_generation(http, "poll-abandoned", lease_seconds=1))["generation"]
    await append(http, token, ["one"])
    started = time.monotonic()
    page = await http.get(f"/v1/generations/{token}/events", params={"after": 1, "wait": 20})
    assert page.status_code == 200, page.text
    body = page.json()
    assert (body["abandoned"], body["events"], body["superseded"]) == (True, [], False)
    assert time.monotonic() - started < LEASE + SWEEP + SLACK


async def _frames(base: str, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    url = base.replace("http://", "ws://") + "/v1/append"
    async with connect(url) as channel:
        for frame in frames:
            await channel.send(json.dumps(frame))
        return [json.loads(await channel.recv()) for _ in frames]


async def test_a_channel_renews_one_or_many_generations(http: httpx.AsyncClient, base: str) -> None:
    tokens = [
        (await open_generation(http, f"channel-lease-{i}", lease_seconds=1))["generation"]
        for i in range(3)
    ]
    await append(http, tokens[2], ["x"], terminal=True)
    deadline = time.monotonic() + 3 * LEASE + SWEEP
    answers: list[dict[str, Any]] = []
    while time.monotonic() < deadline:  # silent, renewed over the channel only
        answers = await _frames(
            base,
            [
                {"id": 1, "generation": tokens[0], "lease": True},
                {"id": 2, "generations": tokens, "lease": True},
            ],
        )
        await asyncio.sleep(LEASE / 4)
    one, many = answers
    assert (one["id"], one["status"], one["generation"]) == (1, 200, tokens[0])
    assert (many["id"], many["status"]) == (2, 200)
    assert [(e["generation"], e["status"]) for e in many["leases"]] == [
        (tokens[0], 200),
        (tokens[1], 200),
        (tokens[2], 409),
    ]
    assert many["leases"][2]["code"] == "terminal"
    for i in range(2):
        assert (await _stream(http, f"channel-lease-{i}"))["abandoned"] is False


async def test_a_lease_frame_names_one_generation_or_many(base: str) -> None:
    token = "AAAAAAAAAAAAAAAAAAAAAA"
    both, neither = await _frames(
        base,
        [
            {"id": "a", "generation": token, "generations": [token], "lease": True},
            {"id": "b", "lease": True},
        ],
    )
    assert (both["status"], both["code"]) == (422, "validation_error")
    assert (neither["status"], neither["code"]) == (422, "validation_error")
