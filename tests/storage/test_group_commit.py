"""The SQLite group committer: grouped writes commit together in the writer thread, a
refusal stays alone, a failure fails (and stores nothing of) its whole group, and closing
answers the group in flight truthfully and refuses what is queued."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Connection

from app.domain.append import AppendConflict
from app.errors import ConflictingBatch, StorageError, StorageUnavailable
from app.settings import Settings
from app.storage.database import Database
from app.storage.group_commit import GroupCommit
from app.storage.transactions import Work


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = Database(Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"))
    async with db.connect() as conn:
        await conn.execute(text("CREATE TABLE t (v INTEGER NOT NULL UNIQUE)"))
        await conn.commit()
    yield db
    await db.close()


def insert(value: int) -> Work[int]:
    def work(conn: Connection) -> int:
        conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": value})
        return value

    return work


async def stored(db: Database) -> list[int]:
    return await db.read(
        lambda conn: [row.v for row in conn.execute(text("SELECT v FROM t ORDER BY v"))]
    )


def group_engine(db: Database) -> object:
    transactions = db._transactions
    assert isinstance(transactions, GroupCommit)
    return transactions._engine.engine


async def test_concurrent_writes_commit_in_groups_in_the_writer_thread(database: Database) -> None:
    threads: set[str] = set()
    commits = 0

    def count(_conn: object) -> None:
        nonlocal commits
        commits += 1

    def noting(value: int) -> Work[int]:
        def work(conn: Connection) -> int:
            threads.add(threading.current_thread().name)
            return insert(value)(conn)

        return work

    event.listen(group_engine(database), "commit", count)
    results = await asyncio.gather(*(database.write(noting(v)) for v in range(50)))
    assert results == list(range(50))
    assert await stored(database) == list(range(50))
    assert commits < 50  # the 50 writes shared transactions
    assert len(threads) == 1
    assert threads.pop().startswith("eventlog-writer")


async def test_a_refusal_does_not_touch_its_group(database: Database) -> None:
    def refused(_conn: Connection) -> None:
        raise ConflictingBatch(AppendConflict.SEQ_GAP, "no")

    outcomes = await asyncio.gather(
        database.write(insert(1)),
        database.write(refused),
        database.write(insert(2)),
        return_exceptions=True,
    )
    assert outcomes[0] == 1
    assert outcomes[2] == 2
    assert isinstance(outcomes[1], ConflictingBatch)
    assert await stored(database) == [1, 2]


async def test_a_failure_fails_its_whole_group(database: Database) -> None:
    def refused(_conn: Connection) -> None:
        raise ConflictingBatch(AppendConflict.TERMINAL, "no")

    await database.write(insert(7))
    outcomes = await asyncio.gather(
        database.write(insert(1)),
        database.write(refused),
        database.write(insert(7)),
        database.write(insert(2)),
        return_exceptions=True,
    )
    # the duplicate 7 breaks the transaction: nobody in it is acknowledged, nothing stored;
    # the refused caller too learns that the group failed
    assert all(isinstance(o, StorageError) for o in outcomes), outcomes
    assert await stored(database) == [7]
    assert await database.write(insert(3)) == 3  # and the writer goes on


async def test_close_answers_the_group_in_flight_and_refuses_the_queue(database: Database) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow(conn: Connection) -> int:
        started.set()
        release.wait(timeout=60)
        return insert(1)(conn)

    first = asyncio.ensure_future(database.write(slow))
    await asyncio.to_thread(started.wait, 60)
    queued = asyncio.ensure_future(database.write(insert(2)))
    await asyncio.sleep(0)
    closing = asyncio.ensure_future(database._transactions.close())
    await asyncio.sleep(0.05)
    release.set()
    await closing
    assert await first == 1  # it committed, and its caller is told so
    with pytest.raises(StorageUnavailable):
        await queued
    assert await stored(database) == [1]


async def test_the_committer_does_not_keep_the_context_of_the_request_that_started_it(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("rid", default=None)
    seen: list[str | None] = []

    class Noting(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            seen.append(request_id.get())  # what a request-id log filter would stamp
            return True

    async def as_request(rid: str, value: int) -> None:
        request_id.set(rid)
        with contextlib.suppress(StorageError):
            await database.write(insert(value))

    noting = Noting()
    logging.getLogger("app.storage.group_commit").addFilter(noting)
    try:
        await asyncio.create_task(as_request("first", 1))  # this request starts the committer
        await asyncio.create_task(as_request("second", 1))  # a duplicate: the group fails
    finally:
        logging.getLogger("app.storage.group_commit").removeFilter(noting)
    # the committer's own log line ("a group of 1 writes failed") carries no request's id
    assert seen == [None]
