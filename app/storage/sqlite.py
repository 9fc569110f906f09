"""SQLite, the embedded default: one file, WAL, one group committer per process.

Everything that is SQLite's alone is behind the hooks of `Dialect`, here and in three
modules of one job each:

- the engines (here): the aiosqlite engine for reads (a deferred transaction in WAL mode
  sees one snapshot) and a stdlib-driver twin for the writer thread, both with the pragmas
  (WAL, `synchronous`, busy timeout, foreign keys), and `BEGIN` said by us, not the driver;
- how writes run: `GroupCommit` (`app/storage/group_commit.py`), one committer per process
  whose queued writes share one transaction and one fsync;
- wake-ups from other processes on the same file: `SqliteDataVersion`
  (`app/storage/sqlite_poll.py`), polling `PRAGMA data_version`;
- the common append (`append_at_tail`): the shared statements of `tail.py` run on the
  stdlib driver's cursor in the writer thread (`app/storage/sqlite_cursor.py`);
- its spelling of `INSERT … ON CONFLICT DO NOTHING` (here); and no cross-replica lock, since
  one machine serves the file and every write is serialised anyway.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Column, ColumnElement, Table, create_engine, event
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Engine, ExceptionContext, RowMapping, make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.dml import Insert

from app.settings import Settings
from app.storage import sqlite_cursor, tail
from app.storage.dialect import Dialect, Engines
from app.storage.errors import is_read_only
from app.storage.group_commit import GroupCommit
from app.storage.sqlite_poll import SqliteDataVersion
from app.storage.transactions import Checkouts, Transactions
from app.storage.wakeups import LocalCommits, WakeupSource

_BEGIN = "eventlog_sqlite_begin"

# The async engine's pool for a file: reads and revision checks (writes run on the writer
# thread's own connection). Every connection is kept, none overflows: an overflow
# connection is closed at check-in, so a later checkout would open one (a thread, the
# file, the pragmas) and run behind the callers queued before it, which the checkouts'
# order must not allow (docs/performance.md, "SQLite read pool"). An in-memory database
# gets one shared connection, as SQLAlchemy would choose for its URL.
_READ_POOL_SIZE, _READ_POOL_OVERFLOW = 15, 0


class SqliteDialect(Dialect):
    """The embedded default: one file, WAL, one group committer per process."""

    name = "sqlite"
    migrates_on_start = True

    def engines(self, settings: Settings) -> Engines:
        url = make_url(settings.database_url)
        if url.database in (None, "", ":memory:") or url.query.get("mode") == "memory":
            # One in-memory database is one connection's: every user shares it, in turn.
            pool: dict[str, Any] = {"poolclass": StaticPool}
            capacity = 1
        else:
            pool = {"pool_size": _READ_POOL_SIZE, "max_overflow": _READ_POOL_OVERFLOW}
            capacity = _READ_POOL_SIZE + _READ_POOL_OVERFLOW
        base = create_async_engine(settings.database_url, connect_args={"timeout": 30}, **pool)
        _install_hooks(base.sync_engine, settings)
        return Engines(
            base=base,
            snapshot=base.execution_options(**{_BEGIN: "DEFERRED"}),
            checkouts=Checkouts(capacity),
        )

    def location_problem(self, database_url: str) -> str | None:
        # SQLite writes its journal (-wal, -shm) beside the file, so the folder must be
        # writable even when the file exists; a missing folder is never created for it.
        url = make_url(database_url)
        if url.database in (None, "", ":memory:") or url.query.get("mode") == "memory":
            return None
        path = Path(url.database).absolute()
        folder = path.parent
        fix = "or set EVENTLOG_DATABASE_URL to a file in a folder the service may write"
        cannot = f"the SQLite database {path} cannot be opened:"
        if not folder.is_dir():
            missing = "does not exist" if not folder.exists() else "is not a folder"
            return f"{cannot} {folder} {missing} (create it, {fix})"
        if not os.access(folder, os.W_OK | os.X_OK):
            return (
                f"{cannot} its folder {folder} is not writable by this user (SQLite writes "
                f"its journal beside the file; allow it, {fix})"
            )
        # An existing file that cannot be written now is not a start-up mistake: the service
        # starts, says so in /readyz (503) and writes again once the file is writable.
        return None

    def transactions(
        self, settings: Settings, engines: Engines, local: LocalCommits
    ) -> Transactions:
        # The writer thread uses the stdlib driver directly: a whole group of writes runs
        # there without one event-loop round trip per statement.
        sync = _stdlib_engine(settings).execution_options(**{_BEGIN: "IMMEDIATE"})
        return GroupCommit(sync, local.committed)

    def wakeup_sources(self, settings: Settings, local: LocalCommits) -> list[WakeupSource]:
        return [SqliteDataVersion(_stdlib_engine(settings), interval=settings.live_poll_seconds)]

    def insert_ignore(self, table: Table, keys: Sequence[Column[Any]]) -> Insert:
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(keys))

    def append_at_tail(self, conn: Connection, at: tail.AtTail) -> RowMapping | None:
        """The shared two statements, run on the stdlib driver's cursor (see the module)."""
        return sqlite_cursor.append_at_tail(conn, at)

    @asynccontextmanager
    async def exclusive(self, engines: Engines, key: int) -> AsyncIterator[bool]:
        """Always held: one machine serves the file, and its writes are serialised anyway."""
        yield True

    def starts_with(self, column: Column[str], prefix: str) -> ColumnElement[bool]:
        """`GLOB 'prefix*'`: SQLite's `LIKE` ignores ASCII letter case, `GLOB` does not (and
        uses the index as `LIKE` would). `*`, `?` and `[` of the prefix match themselves."""
        escaped = "".join(f"[{c}]" if c in "*?[" else c for c in prefix)
        return column.op("GLOB")(escaped + "*")


def _stdlib_engine(settings: Settings) -> Engine:
    """The SQLite file through the stdlib driver, for a thread of its own."""
    engine = create_engine(
        make_url(settings.database_url).set(drivername="sqlite"),
        connect_args={"timeout": 30, "check_same_thread": False},
    )
    _install_hooks(engine, settings)
    return engine


def _install_hooks(engine: Engine, settings: Settings) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us, not the driver, say when a transaction begins (and how).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={settings.sqlite_synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={int(settings.sqlite_busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "handle_error")
    def _read_only_is_lost(context: ExceptionContext) -> None:
        # SQLite opens a file it may not write read-only, and that connection stays so
        # after the file is writable again: treat it as lost, so that the pool drops it
        # and the next write opens the file anew.
        if is_read_only(context.original_exception):
            context.is_disconnect = True

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(_BEGIN, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")
