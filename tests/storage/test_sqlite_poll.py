"""The SQLite poller for other processes' commits: stopping it never leaves its thread
using the connection it is about to close (closing a stdlib SQLite connection while
another thread runs a statement on it can crash the interpreter)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event

from app.storage.sqlite_poll import SqliteDataVersion
from tests.storage.fakes import Hub


async def test_a_stop_during_a_poll_closes_the_connection_only_after_the_poll(
    tmp_path: Path,
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    in_poll = threading.Event()
    release = threading.Event()
    busy: list[bool] = []  # the poll was still running when the connection closed

    @event.listens_for(engine, "before_cursor_execute")
    def _slow_poll(*_args: Any) -> None:
        if hub.up.is_set():
            in_poll.set()
            release.wait(5)

    @event.listens_for(engine, "close")
    def _closing(*_args: Any) -> None:
        busy.append(in_poll.is_set() and not release.is_set())

    hub = Hub()
    poller = asyncio.create_task(SqliteDataVersion(engine, interval=0.01).run(hub))
    await asyncio.wait_for(hub.up.wait(), 5)
    await asyncio.to_thread(in_poll.wait, 5)
    poller.cancel()
    await asyncio.sleep(0.05)
    assert not poller.done()  # it waits for the statement in its thread
    release.set()
    await asyncio.wait([poller], timeout=5)
    assert poller.cancelled()
    assert busy == [False]
