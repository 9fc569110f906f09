"""`EventLogClient.follow` and `page(wait=)` against a real service process, on SQLite and
PostgreSQL.

One service per backend serves the module, with short live-read settings: a heartbeat of
0.3 s, `retry: 100` and connections ended after 1 s, so reconnections happen within a
test. Every ordering across the process boundary is awaited with a deadline (the next
item of the follower, the service's audit log counting a decision), never slept for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from mcp_eventlog_client import (
    BeyondTail,
    CrossStream,
    EventLogClient,
    LiveEnd,
    LiveEvent,
    LiveItem,
    LiveReset,
    MalformedId,
    NewEvent,
    ReservedEventType,
    RetryPolicy,
    ServiceUnreachable,
    UnknownGeneration,
    UnknownStream,
    ValidationFailed,
)

from tests.support.transports import DropStreamOnce, RefuseConnections

pytestmark = pytest.mark.process

WAIT = 30.0
SERVER_ENV = {
    "EVENTLOG_LIVE_HEARTBEAT_SECONDS": "0.3",
    "EVENTLOG_LIVE_RETRY_MS": "100",
    "EVENTLOG_LIVE_MAX_SECONDS": "1",
    "EVENTLOG_LIVE_MAX_WAIT_SECONDS": "5",
    "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0",
}
TRANSPORTS = ["default", "httpx"]


@pytest.fixture
async def log(base: str) -> AsyncIterator[EventLogClient]:
    async with EventLogClient(base) as client:
        yield client


class Follow:
    """A follower running in a task; the test awaits its items with a deadline."""

    def __init__(self, items: AsyncIterator[LiveItem]) -> None:
        self.queue: asyncio.Queue[LiveItem | BaseException] = asyncio.Queue()
        self.task = asyncio.create_task(self._run(items))

    async def _run(self, items: AsyncIterator[LiveItem]) -> None:
        try:
            async for item in items:
                self.queue.put_nowait(item)
        except Exception as error:
            self.queue.put_nowait(error)

    async def next(self) -> LiveItem:
        async with asyncio.timeout(WAIT):
            item = await self.queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def take(self, count: int) -> list[LiveItem]:
        return [await self.next() for _ in range(count)]

    async def close(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


async def first(items: AsyncIterator[LiveItem]) -> LiveItem:
    """The first item a follower yields (within the deadline)."""
    async with asyncio.timeout(WAIT):
        return await anext(items)


async def decisions(base: str, stream_id: str) -> int:
    """How many resume decisions the service audited for the stream (one per connection)."""
    async with httpx.AsyncClient(base_url=base) as http:
        answer = await http.get("/admin/v1/decisions", params={"stream_id": stream_id})
        assert answer.status_code == 200, answer.text
        return len(answer.json()["decisions"])


async def decisions_reach(base: str, stream_id: str, count: int) -> None:
    # Another process's audit log: nothing to await, so it is asked until it agrees.
    async with asyncio.timeout(WAIT):
        while await decisions(base, stream_id) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_events_arrive_typed_in_order_then_end(base: str, transport: str) -> None:
    chosen = httpx.AsyncHTTPTransport() if transport == "httpx" else None
    async with EventLogClient(base, transport=chosen) as log:
        stream = f"follow-typed-{transport}"
        gen = await log.open_generation(stream)
        follow = Follow(log.follow(stream))
        await log.append(
            gen.token,
            [NewEvent("a"), NewEvent("b\nsecond line", event="note"), NewEvent("c", "message")],
            first_seq=1,
        )
        items = await follow.take(3)
        assert items == [
            LiveEvent(f"{gen.token}:1", gen.token, 1, "message", "a"),
            LiveEvent(f"{gen.token}:2", gen.token, 2, "note", "b\nsecond line"),
            LiveEvent(f"{gen.token}:3", gen.token, 3, "message", "c"),
        ]
        await log.append(gen.token, [NewEvent("last")], first_seq=4, terminal=True)
        assert await follow.take(2) == [
            LiveEvent(f"{gen.token}:4", gen.token, 4, "message", "last"),
            LiveEnd(gen.token, 4),
        ]
        await follow.task  # the iteration ended by itself after `end`


async def test_it_reconnects_with_its_last_id_when_the_service_ends_the_connection(
    base: str, log: EventLogClient
) -> None:
    stream = "follow-reconnects"
    gen = await log.open_generation(stream)
    follow = Follow(log.follow(stream))
    seen: list[LiveItem] = []
    for round_ in range(3):
        # Each connection lives 1 s: wait until the service decided one more claim. (The
        # first connections hold no position: they are not decisions, nothing is audited.)
        await decisions_reach(base, stream, round_)
        first = 1 + 2 * round_
        await log.append(
            gen.token, [NewEvent(f"e{first}"), NewEvent(f"e{first + 1}")], first_seq=first
        )
        seen += await follow.take(2)
    assert [item.data for item in seen if isinstance(item, LiveEvent)] == [
        f"e{n}" for n in range(1, 7)
    ]
    assert [item.seq for item in seen if isinstance(item, LiveEvent)] == list(range(1, 7))
    await follow.close()


async def test_a_superseded_generation_is_reset_then_the_new_one_follows(
    log: EventLogClient,
) -> None:
    stream = "follow-superseded"
    old = await log.open_generation(stream)
    await log.append(old.token, [NewEvent("old-1")], first_seq=1)
    follow = Follow(log.follow(stream, f"{old.token}:0"))
    assert await follow.next() == LiveEvent(f"{old.token}:1", old.token, 1, "message", "old-1")
    new = await log.open_generation(stream)
    await log.append(new.token, [NewEvent("new-1")], first_seq=1)
    assert await follow.take(2) == [
        LiveReset("superseded", new.token),
        LiveEvent(f"{new.token}:1", new.token, 1, "message", "new-1"),
    ]
    await follow.close()


async def test_the_control_event_names_are_refused_as_stored_types(log: EventLogClient) -> None:
    # `reset` and `end` are the live reads' control events (a browser's EventSource would
    # dispatch a stored one to their listeners): an append of either is refused, typed.
    stream = "follow-typed-reset"
    gen = await log.open_generation(stream)
    for name in ("reset", "end"):
        with pytest.raises(ReservedEventType):
            await log.append(gen.token, [NewEvent('{"reason": "x"}', name)], first_seq=1)
    view = await log.stream(stream)
    assert view.current is not None
    assert view.current.tail_seq == 0


async def test_an_invalid_claim_raises_its_typed_error(log: EventLogClient) -> None:
    gen = await log.open_generation("follow-invalid")
    other = await log.open_generation("follow-invalid-other")
    await log.append(gen.token, [NewEvent("a")], first_seq=1)
    cases: list[tuple[str, str | None, type[Exception]]] = [
        ("follow-invalid", "not an id", MalformedId),
        ("follow-invalid", "QUJDREVGR0hJSktMTU5PUA:1", UnknownGeneration),
        ("follow-invalid", f"{other.token}:0", CrossStream),
        ("follow-invalid", f"{gen.token}:9", BeyondTail),
        ("follow-never-opened", None, UnknownStream),
    ]
    for stream, claim, error in cases:
        with pytest.raises(error):
            await first(log.follow(stream, claim))


async def test_a_dropped_connection_is_resumed_from_the_last_event(base: str) -> None:
    async with EventLogClient(base) as writer:
        gen = await writer.open_generation("follow-dropped")
        await writer.append(gen.token, [NewEvent("a"), NewEvent("b")], first_seq=1)
    cut = DropStreamOnce(httpx.AsyncHTTPTransport(), marker=b"data: a\n\n")
    async with EventLogClient(base, transport=cut) as log:
        follow = Follow(log.follow("follow-dropped"))
        items = await follow.take(2)
        assert [item.data for item in items if isinstance(item, LiveEvent)] == ["a", "b"]
        await follow.close()
    assert cut.requests[1].headers["last-event-id"] == f"{gen.token}:1"


async def test_refused_connections_are_retried_with_backoff_then_raised(base: str) -> None:
    async with EventLogClient(base) as writer:
        gen = await writer.open_generation("follow-refused")
        await writer.append(gen.token, [NewEvent("a")], first_seq=1)
    flaky = RefuseConnections(httpx.AsyncHTTPTransport(), count=2)
    patient = RetryPolicy(attempts=3, base_delay=0.01)
    async with EventLogClient(base, transport=flaky, retry=patient) as log:
        follow = Follow(log.follow("follow-refused"))
        assert isinstance(await follow.next(), LiveEvent)
        await follow.close()
    assert flaky.refused == 2
    down = RefuseConnections(httpx.AsyncHTTPTransport(), count=10)
    async with EventLogClient(base, transport=down, retry=patient) as log:
        with pytest.raises(ServiceUnreachable):
            await first(log.follow("follow-refused"))
    assert down.refused == 3


async def test_page_waits_for_an_append(log: EventLogClient) -> None:
    gen = await log.open_generation("page-wait")
    waiting = asyncio.create_task(log.page(gen.token, after=0, wait=4))
    await log.append(gen.token, [NewEvent("late")], first_seq=1)
    page = await waiting
    assert [e.data for e in page.events] == ["late"]
    assert page.superseded is False


async def test_page_wait_answers_superseded_and_empty(log: EventLogClient) -> None:
    gen = await log.open_generation("page-wait-superseded")
    await log.append(gen.token, [NewEvent("a")], first_seq=1)
    assert (await log.page(gen.token, after=1, wait=0.2)).events == ()
    await log.open_generation("page-wait-superseded")
    page = await log.page(gen.token, after=1, wait=4)
    assert (page.events, page.superseded) == ((), True)
    with pytest.raises(ValidationFailed):
        await log.page(gen.token, after=1, wait=60)
