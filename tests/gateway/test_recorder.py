"""The recorder: one append in flight, the messages arriving meanwhile in the next batch,
each relayed only once stored; a batch the log cannot store spoils the generation. Against
the real service on both databases (the append is only watched, not replaced)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from app import bootstrap
from app.bootstrap import Container
from app.domain.append import EventBody
from app.errors import StorageUnavailable
from app.gateway.messages import bodies_of
from app.gateway.recorder import Recorder
from app.settings import Settings


@pytest.fixture
async def container(settings: Settings) -> AsyncIterator[Container]:
    built = bootstrap.build(settings)
    try:
        yield built
    finally:
        await built.close()


class Watched:
    """The service's append, held at a gate, each batch's size kept."""

    def __init__(self, container: Container) -> None:
        self.real = container.eventlog.append
        self.batches: list[int] = []
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.fail = False

    async def append(self, tenant: str, token: str, batch: Sequence[EventBody], **kw: Any) -> Any:
        self.batches.append(len(batch))
        self.entered.set()
        await self.gate.wait()
        if self.fail:
            raise StorageUnavailable("the database is down (a test says so)")
        return await self.real(tenant, token, batch, **kw)


def recorder_of(container: Container) -> tuple[Recorder, list[int]]:
    unstored: list[int] = []
    recorder = Recorder(
        container.eventlog,
        tenant="default",
        stream_id="mcp.Zq3xVb9-_fKp2LmN8rTw1A.7",
        producer="test",
        max_batch_events=100,
        on_unstored=lambda count, _why: unstored.append(count),
        on_stored=lambda _count: None,
    )
    return recorder, unstored


async def test_messages_arriving_during_an_append_go_into_the_next_batch(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    watched = Watched(container)
    monkeypatch.setattr(container.eventlog, "append", watched.append)
    recorder, _ = recorder_of(container)
    first = recorder.submit(bodies_of('{"n":1}', 1000))
    await watched.entered.wait()
    later = [recorder.submit(bodies_of(f'{{"n":{n}}}', 1000)) for n in range(2, 12)]
    last = recorder.submit(bodies_of('{"id":7,"result":{}}', 1000), terminal=True)
    await asyncio.sleep(0)
    assert not first.done()  # not relayed before it is stored
    watched.gate.set()
    ids = [await first] + [await f for f in later] + [await last]
    assert watched.batches == [1, 11]  # one commit carried the eleven that waited
    token = recorder.token
    assert ids == [f"{token}:{seq}" for seq in range(1, 13)]
    assert recorder.terminal


async def test_a_batch_the_log_cannot_store_is_relayed_without_ids_then_a_new_generation(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    watched = Watched(container)
    watched.gate.set()
    monkeypatch.setattr(container.eventlog, "append", watched.append)
    recorder, unstored = recorder_of(container)
    stored = await recorder.submit(bodies_of('{"n":1}', 1000))
    watched.fail = True
    assert await recorder.submit(bodies_of('{"n":2}', 1000)) is None
    assert unstored == [1]
    watched.fail = False
    again = await recorder.submit(bodies_of('{"n":3}', 1000))
    assert stored is not None
    assert again is not None
    assert again.rsplit(":", 1)[0] != stored.rsplit(":", 1)[0]  # the spoiled one is fenced
    assert again.endswith(":1")
    reading = await container.eventlog.resume("default", stored, asked_stream=None, limit=10)
    assert (reading.decision.verdict.value, reading.decision.reason.value) == (
        "reset",
        "superseded",
    )


async def test_a_stream_that_ends_spoiled_is_fenced_once_the_log_is_back(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The response itself could not be stored: no next batch fences the generation, so
    `fence` does — retried while the log is away — and a resume of it is `reset`, not a
    wait for a terminal that never comes."""
    watched = Watched(container)
    watched.gate.set()
    monkeypatch.setattr(container.eventlog, "append", watched.append)
    real_open = container.eventlog.open_generation
    opens_refused = 0
    retried = asyncio.Event()

    async def open_generation(*args: Any, **kw: Any) -> Any:
        nonlocal opens_refused
        if watched.fail:
            opens_refused += 1
            if opens_refused >= 2:
                retried.set()
            raise StorageUnavailable("the database is down (a test says so)")
        return await real_open(*args, **kw)

    monkeypatch.setattr(container.eventlog, "open_generation", open_generation)
    recorder, unstored = recorder_of(container)
    stored = await recorder.submit(bodies_of('{"n":1}', 1000))
    assert stored is not None
    watched.fail = True
    answer = recorder.submit(bodies_of('{"id":7,"result":{}}', 1000), terminal=True)
    assert await answer is None
    assert unstored == [1]
    before = await container.eventlog.resume("default", stored, asked_stream=None, limit=10)
    assert before.decision.verdict.value == "resume"  # open, and it would wait for ever

    fencing = asyncio.create_task(recorder.fence(30, first_wait=0.05))
    await asyncio.wait_for(retried.wait(), 10)  # the log is still away: it retries
    assert not fencing.done()
    watched.fail = False
    assert await asyncio.wait_for(fencing, 10) is True
    after = await container.eventlog.resume("default", stored, asked_stream=None, limit=10)
    assert (after.decision.verdict.value, after.decision.reason.value) == ("reset", "superseded")
    assert recorder.terminal
    assert recorder.spoiled is None


async def test_fencing_gives_up_after_its_time_and_says_so(
    container: Container, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    watched = Watched(container)
    watched.gate.set()
    monkeypatch.setattr(container.eventlog, "append", watched.append)

    async def refused(*_args: Any, **_kw: Any) -> Any:
        raise StorageUnavailable("the database is down (a test says so)")

    recorder, _ = recorder_of(container)
    assert await recorder.submit(bodies_of('{"n":1}', 1000)) is not None
    watched.fail = True
    assert await recorder.submit(bodies_of('{"n":2}', 1000)) is None
    monkeypatch.setattr(container.eventlog, "open_generation", refused)
    assert await recorder.fence(0.2, first_wait=0.05) is False
    assert recorder.spoiled is not None
    assert "stays spoiled and open" in caplog.text


async def test_a_stream_stored_whole_needs_no_fence(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[object] = []
    real_open = container.eventlog.open_generation

    async def open_generation(*args: Any, **kw: Any) -> Any:
        opened.append(args)
        return await real_open(*args, **kw)

    monkeypatch.setattr(container.eventlog, "open_generation", open_generation)
    recorder, _ = recorder_of(container)
    assert await recorder.submit(bodies_of('{"id":7,"result":{}}', 1000), terminal=True)
    assert await recorder.fence(5) is True
    assert len(opened) == 1


async def test_room_holds_the_reader_until_few_enough_messages_wait_for_their_commit(
    container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upstream faster than the log is paced by it: `room(most)` returns only once at
    most `most` submitted messages are still waiting for their commit."""
    watched = Watched(container)
    monkeypatch.setattr(container.eventlog, "append", watched.append)
    recorder, _ = recorder_of(container)
    for n in range(500):
        recorder.submit(bodies_of(f'{{"n":{n}}}', 1000))
    await watched.entered.wait()
    room = asyncio.create_task(recorder.room(50))
    await asyncio.sleep(0.05)
    assert not room.done()  # the first append is held: 400 wait behind it
    watched.gate.set()
    await asyncio.wait_for(room, 30)
    assert len(recorder._pending) <= 50
    await recorder.drain()
    assert sum(watched.batches) == 500
