"""The live-read use case's ends: a storage failure ends a live read quietly (the reader
reconnects and is decided again) and frees its slot, whether it is read as frames or as
encoded bodies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI

from app.domain.append import EventBody
from app.domain.decision import Reason
from app.service.frames import EventFrame, Frame, ResetFrame
from app.settings import Settings
from app.storage.errors import StorageUnavailable
from tests.support.app import started_app, state_of

TENANT = "default"


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    async with started_app(settings) as (app, _client):
        yield app


def encode(batch: Sequence[Frame]) -> bytes:
    return repr(list(batch)).encode()


@pytest.mark.parametrize("served_as", ["frames", "bodies"])
async def test_a_storage_failure_ends_the_read_and_frees_its_slot(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch, served_as: str
) -> None:
    container = state_of(app).container
    gen = await container.eventlog.open_generation(TENANT, "s.failing")
    follow = await container.live.follow(TENANT, "s.failing", f"{gen.token}:0")
    assert container.admission.readers == 1

    async def failing(*_args: Any, **_kwargs: Any) -> Any:
        raise StorageUnavailable("the database went away")

    monkeypatch.setattr(container.reads, "step", failing)
    live = container.live
    served = live.frames(follow) if served_as == "frames" else live.bodies(follow, encode)
    assert [batch async for batch in served] == []  # ended, not raised
    assert container.admission.readers == 0
    assert list(container.hub.watched()) == []


async def test_a_generation_superseded_before_its_first_event_gets_a_second_reset(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader decided `reset` toward X, where X is superseded by Y
    before X's first event is sent, gets a second `reset` (superseded) naming Y before Y's
    events — never Y from seq 1 under the first reset. The race is forced here: Y is opened
    right after the decision, before the read takes its slot (the chaos run's timing)."""
    container = state_of(app).container
    eventlog = container.eventlog
    stream = "s.superseded-twice"
    w = await eventlog.open_generation(TENANT, stream)
    await eventlog.append(TENANT, w.token, [EventBody("w1")], first_seq=1, terminal=False)
    x = await eventlog.open_generation(TENANT, stream)  # supersedes W; X holds nothing yet
    opened: list[str] = []
    decide = eventlog.resume

    async def decide_then_supersede(*args: Any, **kwargs: Any) -> Any:
        reading = await decide(*args, **kwargs)
        y = await eventlog.open_generation(TENANT, stream)  # X superseded, unread
        await eventlog.append(TENANT, y.token, [EventBody("y1")], first_seq=1, terminal=True)
        opened.append(y.token)
        return reading

    monkeypatch.setattr(eventlog, "resume", decide_then_supersede)
    follow = await container.live.follow(TENANT, stream, f"{w.token}:1")
    async with asyncio.timeout(30):  # Y is terminal: the read ends after it
        frames = [frame async for batch in container.live.frames(follow) for frame in batch]
    [y] = opened
    resets = [f for f in frames if isinstance(f, ResetFrame)]
    events = [f for f in frames if isinstance(f, EventFrame)]
    assert [(r.reason, r.generation) for r in resets] == [
        (Reason.SUPERSEDED, x.token),
        (Reason.SUPERSEDED, y),
    ]
    assert [(e.token, e.seq, e.data) for e in events] == [(y, 1, "y1")]
    assert frames.index(resets[1]) < frames.index(events[0])


@asynccontextmanager
async def _reading(app: FastAPI, stream: str, claim: str | None) -> AsyncIterator[Any]:
    """The frames of one live connection with `claim`, for 30 s at the most; then the reader
    drops (its generator is closed and its slot freed, as a dropped connection's is)."""
    live = state_of(app).container.live
    follow = await live.follow(TENANT, stream, claim)
    served = live.frames(follow)
    try:
        async with asyncio.timeout(30):
            yield served
    finally:
        await served.aclose()
        follow.close()


async def _read_until(served: AsyncIterator[Sequence[Frame]], frames: list[Frame], n: int) -> None:
    """Read batches into `frames` until it holds `n` frames (or more)."""
    async for batch in served:
        frames.extend(batch)
        if len(frames) >= n:
            break


async def _frames_of(app: FastAPI, stream: str, claim: str | None, count: int) -> list[Frame]:
    """The first `count` frames of one live connection with `claim`; then the reader drops."""
    frames: list[Frame] = []
    async with _reading(app, stream, claim) as served:
        await _read_until(served, frames, count)
    return frames[:count]


def _shown(frames: Sequence[Frame]) -> list[tuple[str, str | None, int | None]]:
    return [
        ("reset", f.generation, None) if isinstance(f, ResetFrame) else ("event", f.token, f.seq)
        for f in frames
        if isinstance(f, ResetFrame | EventFrame)
    ]


@pytest.mark.parametrize("reconnect_claim", ["last_event_id", "named_generation"])
async def test_a_reader_that_drops_after_a_reset_toward_x_gets_a_second_reset_for_y(
    app: FastAPI, reconnect_claim: str
) -> None:
    """The sequence of the chaos finding, across connections: a reader told `reset` naming
    X drops before X's first event; X is superseded by Y, which gets its seq 1; the reader
    reconnects with its last event id (an EventSource keeps it across a reset: W:1) or with
    the position the reset gave it (X:0, as the Python client does). Either way the new
    connection begins with a `reset` naming Y, then Y from seq 1 — never Y spliced on."""
    eventlog = state_of(app).container.eventlog
    stream = "s.dropped-after-reset"
    w = await eventlog.open_generation(TENANT, stream)
    await eventlog.append(TENANT, w.token, [EventBody("w1")], first_seq=1, terminal=False)
    x = await eventlog.open_generation(TENANT, stream)  # supersedes W; X holds nothing yet
    told = await _frames_of(app, stream, f"{w.token}:1", 1)
    assert _shown(told) == [("reset", x.token, None)]
    y = await eventlog.open_generation(TENANT, stream)  # X superseded before its first event
    await eventlog.append(TENANT, y.token, [EventBody("y1")], first_seq=1, terminal=False)
    claim = f"{w.token}:1" if reconnect_claim == "last_event_id" else f"{x.token}:0"
    again = await _frames_of(app, stream, claim, 2)
    assert _shown(again) == [("reset", y.token, None), ("event", y.token, 1)]
    assert isinstance(again[0], ResetFrame)
    assert again[0].reason is Reason.SUPERSEDED


async def test_a_reader_without_a_position_is_never_told_a_generation_it_cannot_keep(
    app: FastAPI,
) -> None:
    """The chaos finding (a reader told `reset` naming X, then handed Y's seq 1 with no
    second `reset`) as it happened: the reader's first connection has no position; W is
    superseded by X before anything reached it, so it still holds nothing and has no id
    to reconnect with; it drops, X is superseded by Y, and its reconnect (again without a
    position) is given Y from seq 1. It must not have been told X: it is given the current
    generation from seq 1 as a connection without a position is, and nothing names X."""
    eventlog = state_of(app).container.eventlog
    stream = "s.no-position"
    await eventlog.open_generation(TENANT, stream)  # W, empty
    live = state_of(app).container.live
    follow = await live.follow(TENANT, stream, None)  # W, from seq 1: nothing yet
    x = await eventlog.open_generation(TENANT, stream)  # supersedes W before its first event
    served = live.frames(follow)
    try:
        # Before: `reset` naming X at once. Now nothing until X's first event (or a
        # heartbeat, 15 s away): the reader drops while it waits.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(served), 2.0)
    finally:
        await served.aclose()
        follow.close()
    y = await eventlog.open_generation(TENANT, stream)  # X superseded before its first event
    await eventlog.append(TENANT, y.token, [EventBody("y1")], first_seq=1, terminal=False)
    again = await _frames_of(app, stream, None, 1)
    assert _shown(again) == [("event", y.token, 1)]
    assert x.token != y.token


async def test_a_reader_without_a_position_is_reset_once_it_holds_events(app: FastAPI) -> None:
    """Once a reader without a position holds events of W, W superseded by X is a `reset`
    naming X, then X from seq 1 (it must discard what it holds)."""
    eventlog = state_of(app).container.eventlog
    stream = "s.no-position-held"
    w = await eventlog.open_generation(TENANT, stream)
    await eventlog.append(TENANT, w.token, [EventBody("w1")], first_seq=1, terminal=False)
    frames: list[Frame] = []
    async with _reading(app, stream, None) as served:
        frames.extend(await anext(served))  # W's seq 1
        x = await eventlog.open_generation(TENANT, stream)
        await eventlog.append(TENANT, x.token, [EventBody("x1")], first_seq=1, terminal=False)
        await _read_until(served, frames, 3)
    assert _shown(frames) == [
        ("event", w.token, 1),
        ("reset", x.token, None),
        ("event", x.token, 1),
    ]
