"""The SQLite group-commit writer: grouped writes commit together, a refusal stays alone,
a failure fails (and stores nothing of) its whole group, and close refuses queued work."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.append import Refusal
from app.settings import Settings
from app.storage.engine import Engines, create_engines
from app.storage.errors import AppendRefusedError, StorageError, StorageUnavailable
from app.storage.writer import DirectWriter, GroupCommitWriter, SyncWork, Work, writer_for

Fixture = tuple[GroupCommitWriter, Engines]


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[Fixture]:
    engines = create_engines(Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"))
    async with engines.base.begin() as conn:
        await conn.execute(text("CREATE TABLE t (v INTEGER NOT NULL UNIQUE)"))
    group = writer_for(engines.write, engines.sync_write)
    assert isinstance(group, GroupCommitWriter)
    yield group, engines
    await group.close()
    await engines.dispose()


def insert(value: int) -> Work[int]:
    async def work(conn: AsyncConnection) -> int:
        await conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": value})
        return value

    return work


def insert_sync(value: int) -> SyncWork[int]:
    def work(conn: Connection) -> int:
        conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": value})
        return value

    return work


async def stored(engines: Engines) -> list[int]:
    async with engines.base.connect() as conn:
        return [row.v for row in await conn.execute(text("SELECT v FROM t ORDER BY v"))]


async def test_concurrent_writes_commit_in_groups(writer: Fixture) -> None:
    group, engines = writer
    transactions = 0

    def count(_conn: object) -> None:
        nonlocal transactions
        transactions += 1

    event.listen(engines.write.sync_engine, "commit", count)
    results = await asyncio.gather(*(group.run(insert(v)) for v in range(50)))
    assert results == list(range(50))
    assert await stored(engines) == list(range(50))
    assert transactions < 50  # the 50 writes shared transactions


async def test_a_refusal_does_not_touch_its_group(writer: Fixture) -> None:
    group, engines = writer

    async def refused(_conn: AsyncConnection) -> None:
        raise AppendRefusedError(Refusal.SEQ_GAP, "no")

    outcomes = await asyncio.gather(
        group.run(insert(1)), group.run(refused), group.run(insert(2)), return_exceptions=True
    )
    assert outcomes[0] == 1
    assert outcomes[2] == 2
    assert isinstance(outcomes[1], AppendRefusedError)
    assert await stored(engines) == [1, 2]


async def test_a_failure_fails_its_whole_group(writer: Fixture) -> None:
    group, engines = writer
    await group.run(insert(7))
    outcomes = await asyncio.gather(
        group.run(insert(1)), group.run(insert(7)), group.run(insert(2)), return_exceptions=True
    )
    # the duplicate 7 breaks the transaction: nobody in it is acknowledged, nothing stored
    assert all(isinstance(o, StorageError) for o in outcomes), outcomes
    assert await stored(engines) == [7]
    assert await group.run(insert(3)) == 3  # and the writer goes on


async def test_close_refuses_what_is_queued(writer: Fixture) -> None:
    group, engines = writer
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(conn: AsyncConnection) -> int:
        started.set()
        await release.wait()
        return 0

    first = asyncio.ensure_future(group.run(slow))
    await started.wait()
    queued = asyncio.ensure_future(group.run(insert(1)))
    await asyncio.sleep(0)
    await group.close()
    for future in (first, queued):
        with pytest.raises(StorageUnavailable):
            await future
    assert await stored(engines) == []


async def test_postgresql_writes_directly() -> None:
    engines = create_engines(Settings(database_url="postgresql+asyncpg://nobody@127.0.0.1/none"))
    assert isinstance(writer_for(engines.write), DirectWriter)
    await engines.dispose()


async def test_plain_writes_run_grouped_in_the_writer_thread(writer: Fixture) -> None:
    group, engines = writer
    assert engines.sync_write is not None
    threads: set[str] = set()
    commits = 0

    def count(_conn: object) -> None:
        nonlocal commits
        commits += 1

    def noting(value: int) -> SyncWork[int]:
        def work(conn: Connection) -> int:
            threads.add(threading.current_thread().name)
            return insert_sync(value)(conn)

        return work

    event.listen(engines.sync_write.engine, "commit", count)
    results = await asyncio.gather(*(group.run_sync(noting(v)) for v in range(40)))
    assert results == list(range(40))
    assert await stored(engines) == list(range(40))
    assert commits < 40
    assert len(threads) == 1
    assert threads.pop().startswith("eventlog-writer")


async def test_plain_and_async_writes_keep_their_order(writer: Fixture) -> None:
    group, engines = writer

    async def after(conn: AsyncConnection) -> int:
        # runs after the plain write queued before it, in a transaction of its own
        count = (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one()
        await conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": 100 + count})
        return int(count)

    outcomes = await asyncio.gather(
        group.run_sync(insert_sync(1)), group.run(after), group.run_sync(insert_sync(2))
    )
    assert outcomes == [1, 1, 2]
    assert await stored(engines) == [1, 2, 101]


async def test_a_failing_plain_write_fails_its_group(writer: Fixture) -> None:
    group, engines = writer

    def refused(_conn: Connection) -> None:
        raise AppendRefusedError(Refusal.TERMINAL, "no")

    outcomes = await asyncio.gather(
        group.run_sync(insert_sync(5)),
        group.run_sync(refused),
        group.run_sync(insert_sync(5)),
        return_exceptions=True,
    )
    # the duplicate 5 breaks the transaction: nothing of the group is stored and every
    # caller in it, the refused one too, learns that the group failed
    assert all(isinstance(o, StorageError) for o in outcomes), outcomes
    assert await stored(engines) == []
