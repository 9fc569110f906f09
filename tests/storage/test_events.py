"""A generation's events: a page is bounded by its count and its bytes yet never empty when
an event is due, eviction keeps the newest `max_events`, and a tombstone's events are
deleted in chunks, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.append import EventBody
from app.domain.ids import StreamKey
from app.settings import Settings
from app.storage import events, generations
from app.storage.database import Database
from app.storage.records import Tombstoned

NOW = datetime(2026, 12, 3, tzinfo=UTC)


async def test_pages_eviction_and_chunked_deletes(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(settings)
    opening = generations.NewGeneration(reason=None, producer=None, max_events=5, ttl_seconds=60)
    try:
        gen = await db.write(
            lambda c: generations.open_generation(c, StreamKey("t", "s.events"), opening, NOW)
        )
        bodies = [EventBody("x" * 10 * (i + 1)) for i in range(7)]  # 10, 20, ... 70 bytes
        result = await db.write(
            lambda c: events.append(
                c, "t", gen.token, bodies, first_seq=None, terminal=False, now=NOW
            )
        )
        assert (result.first_seq, result.count, result.evicted) == (1, 7, 2)
        stored = await db.read(lambda c: generations.get(c, gen.token))
        assert (stored.head_seq, stored.tail_seq, stored.retained_events) == (3, 7, 5)
        assert stored.retained_bytes == sum(range(30, 80, 10))

        whole = await db.read(
            lambda c: events.read_page(c, stored, after=2, limit=10, max_bytes=10**6)
        )
        assert [e.seq for e in whole.events] == [3, 4, 5, 6, 7]
        assert (whole.through, whole.contiguous) == (7, True)
        counted = await db.read(
            lambda c: events.read_page(c, stored, after=2, limit=2, max_bytes=10**6)
        )
        assert ([e.seq for e in counted.events], counted.through) == ([3, 4], 4)
        sized = await db.read(
            lambda c: events.read_page(c, stored, after=2, limit=10, max_bytes=65)
        )
        assert ([e.seq for e in sized.events], sized.through) == ([3], 3)  # 30 + 40 > 65
        one = await db.read(lambda c: events.read_page(c, stored, after=2, limit=10, max_bytes=1))
        assert [e.seq for e in one.events] == [3]  # never empty when an event is due

        tomb = Tombstoned(stored.pk, stored.tail_seq)
        monkeypatch.setattr(events, "DELETE_CHUNK", 2)
        deleted = [await db.write(lambda c: events.delete_chunk(c, tomb)) for _ in range(4)]
        assert deleted == [2, 2, 1, 0]
    finally:
        await db.close()
