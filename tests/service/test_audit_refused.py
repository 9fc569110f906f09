"""The audit flusher and entries the database refuses, on both databases.

An entry that cannot be stored is dropped alone (logged, counted) and the rest of its batch
is written; an unreachable database keeps every unwritten entry, in order; a hostile claim
(NUL, lone surrogate) is stored escaped, since it is exactly what the log is for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

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
from tests.support.waiting import until


class Counted(Observer):
    def __init__(self) -> None:
        self.dropped = 0

    def audit_dropped(self, count: int) -> None:
        self.dropped += count


class Outage(Database):
    """A real database that goes away after `writes_left` more writes, when told to."""

    writes_left: int | None = None

    async def write(self, work: Work[T], *, weight: int = 1) -> T:
        if self.writes_left is not None:
            if self.writes_left == 0:
                raise StorageUnavailable("the database went away")
            self.writes_left -= 1
        return await super().write(work, weight=weight)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Outage]:
    db = Outage(Settings(database_url=database_url))
    yield db
    await db.close()


def claim(last_event_id: str, tenant: str = "t1") -> Decided:
    decision = decide(parse_event_id(last_event_id), asked_stream="s1", generation=None)
    return Decided(tenant, "s1", last_event_id, decision.verdict, decision.reason, None, 0)


async def written(db: Database) -> list[DecisionEntry]:
    rows = await db.read(lambda conn: decisions.recent(conn, DecisionFilter(), 1000))
    return list(reversed(rows))


# A tenant is never a client's input, so nothing escapes it: a lone surrogate there is an
# entry no database can store (the UTF-8 codec refuses it before the driver sends it).
UNSTORABLE = "tenant-\ud800"


async def test_an_entry_the_database_refuses_is_dropped_alone(
    database: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    counted = Counted()
    audit = DecisionAudit(database, observer=counted)
    for n in range(7):
        audit.decided(claim(f"good-{n}", tenant=UNSTORABLE if n == 3 else "t1"))
    await audit.flush()
    kept = [e.last_event_id for e in await written(database)]
    assert kept == ["good-0", "good-1", "good-2", "good-4", "good-5", "good-6"]
    assert counted.dropped == 1
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "dropped" in error.getMessage()
    assert "good-3" in error.getMessage()
    audit.decided(claim("after"))
    await audit.flush()  # the buffer is not stuck behind the bad entry
    assert [e.last_event_id for e in await written(database)][-1] == "after"


async def test_hostile_claims_are_stored_escaped(database: Outage) -> None:
    """NUL (PostgreSQL refuses it in text) and lone surrogates, as evidence."""
    counted = Counted()
    audit = DecisionAudit(database, observer=counted)
    for hostile in ("a:1\x00", "\ud800:1", "b\\x00:1"):
        audit.decided(claim(hostile))
    await audit.flush()
    assert [e.last_event_id for e in await written(database)] == [
        "a:1\\x00",
        "\\ud800:1",
        "b\\x00:1",
    ]
    assert counted.dropped == 0


async def test_an_outage_while_isolating_a_bad_entry_keeps_the_rest_in_order(
    database: Outage,
) -> None:
    counted = Counted()
    audit = DecisionAudit(database, observer=counted)
    names = [f"e{n}" for n in range(8)]
    for name in names:
        audit.decided(claim(name, tenant=UNSTORABLE if name == "e5" else "t1"))
    # The whole batch (refused), its first half (written), then the database goes away.
    database.writes_left = 2
    with pytest.raises(StorageUnavailable):
        await audit.flush()
    assert [e.last_event_id for e in await written(database)] == ["e0", "e1", "e2", "e3"]
    database.writes_left = None
    await audit.flush()
    assert [e.last_event_id for e in await written(database)] == [
        "e0",
        "e1",
        "e2",
        "e3",
        "e4",
        "e6",
        "e7",
    ]
    assert counted.dropped == 1


async def test_the_background_flusher_outlives_a_refused_entry(database: Outage) -> None:
    counted = Counted()
    audit = DecisionAudit(database, observer=counted)
    flusher = asyncio.create_task(audit.run())
    try:
        audit.decided(claim("one", tenant=UNSTORABLE))
        audit.decided(claim("two"))

        async def written_count(n: int) -> bool:
            return len(await written(database)) == n and counted.dropped == 1

        await until(lambda: written_count(1))
        audit.decided(claim("three"))
        await until(lambda: written_count(2))
        assert not flusher.done()
    finally:
        flusher.cancel()
    assert [e.last_event_id for e in await written(database)] == ["two", "three"]
