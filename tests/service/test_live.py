"""The live-read use case's ends: a storage failure ends a live read quietly (the reader
reconnects and is decided again) and frees its slot, whether it is read as frames or as
encoded bodies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
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
    assert container.fanout.readers == 1

    async def failing(*_args: Any, **_kwargs: Any) -> Any:
        raise StorageUnavailable("the database went away")

    monkeypatch.setattr(container.reads, "step", failing)
    live = container.live
    served = live.frames(follow) if served_as == "frames" else live.bodies(follow, encode)
    assert [batch async for batch in served] == []  # ended, not raised
    assert container.fanout.readers == 0
    assert list(container.fanout.watched()) == []


async def test_a_generation_superseded_before_its_first_event_gets_a_second_reset(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21, item 9(a): a reader decided `reset` toward X, where X is superseded by Y
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
