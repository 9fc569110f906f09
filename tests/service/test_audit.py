"""The decision audit log's buffer: no I/O on the resume path, bounded, retried on failure."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.domain.decision import decide
from app.domain.ids import parse_event_id
from app.domain.outcomes import Decided
from app.errors import StorageUnavailable
from app.service.audit import DecisionAudit
from app.service.observer import Observer
from app.settings import Settings
from app.storage import decisions
from app.storage.database import Database
from app.storage.decisions import DecisionFilter
from app.storage.records import DecisionEntry
from app.storage.transactions import T, Work

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class FlakyDatabase(Database):
    """A real SQLite database whose writes can be told to fail like a lost one."""

    down = False
    stuck = False
    writes = 0
    wrote: asyncio.Event
    entered: asyncio.Event

    async def write(self, work: Work[T], *, weight: int = 1) -> T:
        if self.down:
            raise StorageUnavailable("database is down")
        if self.stuck:  # a write in flight when the service stops
            self.entered.set()
            await asyncio.Event().wait()
        self.writes += 1
        result = await super().write(work, weight=weight)
        self.wrote.set()
        return result


@pytest.fixture
def database_file(tmp_path: Path, sqlite_template: Path) -> Path:
    path = tmp_path / "audit.db"
    shutil.copyfile(sqlite_template, path)
    return path


@pytest.fixture
async def database(database_file: Path) -> AsyncIterator[FlakyDatabase]:
    db = FlakyDatabase(Settings(database_url=f"sqlite+aiosqlite:///{database_file}"))
    db.wrote = asyncio.Event()
    db.entered = asyncio.Event()
    yield db
    await db.close()


async def written(db: Database) -> list[DecisionEntry]:
    return list(reversed(await db.read(lambda conn: decisions.recent(conn, DecisionFilter(), 100))))


def malformed(claim: str) -> Decided:
    decision = decide(parse_event_id(claim), asked_stream="s1", generation=None)
    return Decided("t1", "s1", claim, decision.verdict, decision.reason, None, 0)


class Dropped(Observer):
    def __init__(self) -> None:
        self.count = 0

    def audit_dropped(self, count: int) -> None:
        self.count += count


def audit_on(db: Database, **options: Any) -> DecisionAudit:
    return DecisionAudit(db, clock=lambda: NOW, **options)


async def test_a_decision_is_only_buffered_until_flushed(database: FlakyDatabase) -> None:
    audit = audit_on(database)
    for n in range(3):
        audit.decided(malformed(f"bad id {n}"))
    assert database.writes == 0
    await audit.flush()
    assert database.writes == 1
    entries = await written(database)
    assert [e.last_event_id for e in entries] == ["bad id 0", "bad id 1", "bad id 2"]
    entry = entries[0]
    assert (entry.tenant, entry.stream_id, entry.verdict, entry.reason) == (
        "t1",
        "s1",
        "invalid",
        "malformed_id",
    )
    assert (entry.decided_at, entry.generation, entry.events) == (NOW, None, 0)


async def test_a_full_buffer_drops_the_oldest_and_counts_them(database: FlakyDatabase) -> None:
    dropped = Dropped()
    audit = audit_on(database, buffer_limit=2, observer=dropped)
    for n in range(5):
        audit.decided(malformed(str(n)))
    await audit.flush()
    assert [e.last_event_id for e in await written(database)] == ["3", "4"]
    assert dropped.count == 3


async def test_a_failed_flush_keeps_the_entries_for_the_next_one(database: FlakyDatabase) -> None:
    audit = audit_on(database)
    audit.decided(malformed("a"))
    database.down = True
    with pytest.raises(StorageUnavailable):
        await audit.flush()
    audit.decided(malformed("b"))
    database.down = False
    await audit.flush()
    assert [e.last_event_id for e in await written(database)] == ["a", "b"]


async def test_disabled_records_nothing_but_still_warns_on_invalid(
    database: FlakyDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    audit = audit_on(database, enabled=False)
    audit.decided(malformed("x" * 500))
    await audit.flush()
    assert await written(database) == []
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "malformed_id" in warning.getMessage()
    assert "x" * 100 not in warning.getMessage()  # a client's claim is logged cut short


async def test_the_background_flusher_writes_within_an_interval(database: FlakyDatabase) -> None:
    audit = audit_on(database)
    flusher = asyncio.create_task(audit.run())
    try:
        audit.decided(malformed("a"))
        async with asyncio.timeout(30):
            await database.wrote.wait()
    finally:
        flusher.cancel()
    assert [e.last_event_id for e in await written(database)] == ["a"]


async def test_a_flush_cancelled_mid_write_keeps_its_entries(database: FlakyDatabase) -> None:
    audit = audit_on(database)
    audit.decided(malformed("a"))
    audit.decided(malformed("b"))
    database.stuck = True
    flushing = asyncio.create_task(audit.flush())
    await database.entered.wait()
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    database.stuck = False
    await audit.flush()  # the last flush at shutdown
    assert [e.last_event_id for e in await written(database)] == ["a", "b"]
