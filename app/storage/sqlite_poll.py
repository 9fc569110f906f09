"""Wake-ups from other processes on the same SQLite file: polling `PRAGMA data_version`.

Nothing is announced on SQLite (there is no channel to announce on): `SqliteDataVersion`
asks the file whether anything committed since it last looked, and narrows a change down
to the watched streams whose signature moved (`generations.signatures`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy.engine import Connection, Engine

from app.storage.generations import signatures
from app.storage.wakeups import Wakeable

T = TypeVar("T")


class SqliteDataVersion:
    """Other processes on the same SQLite file: `PRAGMA data_version`, every `interval` s.

    The counter moves when another connection commits (this process's writer thread too,
    so a change narrows down to the watched streams whose signature really moved).
    """

    name = "sqlite"

    def __init__(self, engine: Engine, *, interval: float) -> None:
        self._engine = engine
        self._interval = interval

    async def run(self, hub: Wakeable) -> None:
        # One connection for good (data_version compares commits seen by *this* connection),
        # used by one thread of its own, and never by two at once: a stop waits for the call
        # in the thread to return before the connection is closed. Closing a stdlib SQLite
        # connection while another thread runs a statement on it can crash the interpreter.
        thread = ThreadPoolExecutor(1, thread_name_prefix="eventlog-sqlite-poll")
        conn: Connection | None = None
        try:
            conn = await _finished(thread, self._engine.connect)
            version = await _finished(thread, _data_version, conn)
            known: dict[int, tuple[int, ...]] = {}
            hub.source_up(self.name, True)
            while True:
                await asyncio.sleep(self._interval)
                now = await _finished(thread, _data_version, conn)
                if now == version:
                    continue
                version = now
                watched = list(hub.watched())
                seen = await _finished(thread, _signatures_of, conn, watched)
                moved = [pk for pk in watched if seen.get(pk) != known.get(pk)]
                known = seen
                if moved:
                    hub.wake(moved)
        finally:
            await asyncio.shield(_close_in(thread, conn, self._engine))


async def _finished(thread: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in `thread`; cancelled meanwhile, wait for it to return, then re-raise."""
    running = asyncio.get_running_loop().run_in_executor(thread, fn, *args)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        await asyncio.wait([running])
        if not running.cancelled() and running.exception() is None:
            _closed_quietly(running.result())
        raise


def _closed_quietly(value: object) -> None:
    # A connection opened by a call that was cancelled meanwhile: nobody else will close it.
    if isinstance(value, Connection):
        value.close()


async def _close_in(thread: ThreadPoolExecutor, conn: Connection | None, engine: Engine) -> None:
    def close() -> None:
        if conn is not None:
            conn.close()
        engine.dispose()

    try:
        await asyncio.get_running_loop().run_in_executor(thread, close)
    finally:
        thread.shutdown(wait=False)


def _data_version(conn: Connection) -> int:
    try:
        return int(conn.exec_driver_sql("PRAGMA data_version").scalar_one())
    finally:
        conn.rollback()  # never keep a read transaction (and its snapshot) open between polls


def _signatures_of(conn: Connection, pks: list[int]) -> dict[int, tuple[int, ...]]:
    try:
        found: dict[int, tuple[int, ...]] = {}
        for start in range(0, len(pks), 500):
            found.update(signatures(conn, pks[start : start + 500]))
        return found
    finally:
        conn.rollback()
