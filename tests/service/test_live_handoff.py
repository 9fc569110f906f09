"""What this process appends reaches its own live readers without being read back, and
what it did not append (another process's change, a supersede) is always read.

(A crowded stream's delayed ring: test_hub.py.)"""

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
from app.storage.changes import TailAppend, take_touched, touched
from app.storage.records import EventRecord, GenerationRecord
from tests.support.app import started_app, state_of

TENANT = "default"


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    # SQLite's poll for other processes' commits sees this process's own as well, and its
    # wake-up (a change only a read can show) would land at any moment of these tests.
    quiet = settings.model_copy(update={"live_poll_seconds": 3600.0})
    async with started_app(quiet) as (app, _client):
        yield app


class CountedSteps:
    """Wraps the read path's `step` (a live reader's database read) and counts its calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, app: FastAPI) -> None:
        reads = state_of(app).container.reads
        self.calls = 0
        self._started = asyncio.Event()
        step = reads.step

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self._started.set()
            return await step(*args, **kwargs)

        monkeypatch.setattr(reads, "step", counted)

    async def reached(self, count: int) -> None:
        """Until `count` reads have started (a deadline, not a sleep: the machine is shared)."""
        async with asyncio.timeout(5):
            while self.calls < count:
                self._started.clear()
                await self._started.wait()


async def following_a_new_generation(
    app: FastAPI, stream: str
) -> tuple[Any, Any, AsyncIterator[Sequence[Frame]]]:
    """The app's container, a new generation of `stream`, and the frames of a live reader
    of it from its start."""
    container = state_of(app).container
    gen = await container.eventlog.open_generation(TENANT, stream)
    follow = await container.live.follow(TENANT, stream, f"{gen.token}:0")
    return container, gen, container.live.frames(follow)


async def next_frames(frames: AsyncIterator[Sequence[Frame]]) -> list[Frame]:
    return list(await asyncio.wait_for(anext(frames), 5))


async def test_own_appends_are_handed_over_and_other_changes_read(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    container, gen, frames = await following_a_new_generation(app, "s.handoff")
    steps = CountedSteps(monkeypatch, app)
    try:
        first = asyncio.create_task(next_frames(frames))
        await steps.reached(1)
        await asyncio.sleep(0.05)  # the reader reads once, finds nothing, waits
        read_before = steps.calls
        await container.eventlog.append(
            TENANT, gen.token, [EventBody("a"), EventBody("b")], first_seq=None, terminal=False
        )
        got = await first
        assert [(f.seq, f.data) for f in got if isinstance(f, EventFrame)] == [(1, "a"), (2, "b")]
        assert steps.calls == read_before  # handed over, not read back

        # A supersede is no append: the reader must read to learn of it.
        newer = await container.eventlog.open_generation(TENANT, "s.handoff")
        got = await next_frames(frames)
        assert steps.calls > read_before
        assert got[0] == ResetFrame(Reason.SUPERSEDED, newer.token)
    finally:
        await frames.aclose()


async def test_a_handoff_is_used_only_from_the_readers_position_and_until_a_change(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    container, gen, frames = await following_a_new_generation(app, "s.behind")
    hub = container.hub
    handoffs = container.live.handoffs
    steps = CountedSteps(monkeypatch, app)
    try:
        waiting = asyncio.create_task(next_frames(frames))
        await asyncio.sleep(0.05)
        await container.eventlog.append(
            TENANT, gen.token, [EventBody("a")], first_seq=None, terminal=False
        )
        assert [f.data for f in await waiting if isinstance(f, EventFrame)] == ["a"]
        assert handoffs.handed(gen.stream_pk, gen.token, 0) is not None  # from seq 0 on only
        assert handoffs.handed(gen.stream_pk, gen.token, 1) is None
        assert handoffs.handed(gen.stream_pk, "another", 0) is None
        reading_on = asyncio.create_task(next_frames(frames))
        await asyncio.sleep(0.05)  # it waits again
        before = steps.calls
        # Another process's change (as its notification tells it): only a read shows it.
        hub.wake([gen.stream_pk], None)
        assert handoffs.handed(gen.stream_pk, gen.token, 0) is None
        await steps.reached(before + 1)
        await asyncio.sleep(0.05)  # and read only once
        assert steps.calls == before + 1  # the woken reader read
        reading_on.cancel()
        await asyncio.wait([reading_on])
    finally:
        await frames.aclose()


def _gen(token: str, tail: int) -> GenerationRecord:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return GenerationRecord(
        pk=1, token=token, stream_pk=7, stream_id="s", tenant="t", epoch=1, reason="initial",
        producer=None, head_seq=1, tail_seq=tail, retained_events=tail, retained_bytes=0,
        terminal=False, terminal_seq=None, max_events=100, ttl_seconds=60, supersedes=None,
        created_at=now, last_append_at=now, expires_at=now, terminal_at=None,
        superseded_at=None, expired_at=None,
    )  # fmt: skip


def _appended(token: str, *seqs: int) -> TailAppend:
    return TailAppend(_gen(token, seqs[-1]), tuple(EventRecord(s, None, f"d{s}") for s in seqs))


class _Conn:
    def __init__(self) -> None:
        self.info: dict[str, Any] = {}


def test_appends_in_one_transaction_merge_only_when_they_follow() -> None:
    conn: Any = _Conn()
    touched(conn, 7, _appended("t", 1, 2))
    touched(conn, 7, _appended("t", 3))
    merged = take_touched(conn)[7]
    assert merged is not None
    assert [e.seq for e in merged.events] == [1, 2, 3]
    assert merged.generation.tail_seq == 3
    for second in (_appended("t", 5), _appended("other", 3), None):
        touched(conn, 7, _appended("t", 1, 2))
        touched(conn, 7, second)
        assert take_touched(conn) == {7: None}  # not one run: readers read
    touched(conn, 7)
    touched(conn, 7, _appended("t", 1))
    assert take_touched(conn) == {7: None}
