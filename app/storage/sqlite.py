"""SQLite, the embedded default: one file, WAL, one group committer per process.

Everything that is SQLite's alone is here, behind the hooks of `Dialect`:

- the engines: the aiosqlite engine for reads (a deferred transaction in WAL mode sees one
  snapshot) and a stdlib-driver twin for the writer thread, both with the pragmas (WAL,
  `synchronous`, busy timeout, foreign keys), and `BEGIN` said by us, not the driver;
- how writes run: `GroupCommit`. SQLite has one write lock per database. When every
  request opens its own `BEGIN IMMEDIATE`, concurrent writers queue inside SQLite's busy
  handler, which sleeps and retries (unfairly: an unlucky request can wait seconds), and
  every append pays its own fsync. So each process sends its writes through one
  committer: writes that arrive while a transaction is running are queued and run
  together in the next one — one `BEGIN IMMEDIATE`, one COMMIT, one fsync for all of them
  — in the committer's own thread on the stdlib driver (one event-loop round trip per
  group, not several per statement). Each caller is answered only after that COMMIT
  returned. Correctness still rests on the database's lock (several processes on one
  file stay safe); the queue adds fairness and throughput, not safety;
- wake-ups from other processes on the same file: `SqliteDataVersion`, polling
  `PRAGMA data_version` (nothing is announced: there is no channel to announce on);
- the common append (`append_at_tail`): the shared guarded `UPDATE … RETURNING` and
  INSERT of `tail.py`, compiled once and run on the stdlib driver's cursor in the writer
  thread. Through the engine, those two statements cost ~180 µs of Python an append
  (execution context, parameter and result processing), on the one thread every write of
  the process waits for; on the cursor ~50 µs. Driver errors are raised as the engine
  would raise them (`DBAPIError.instance`), a read-only connection invalidated. Where
  something listens to the engine's statements (tracing's span per statement), the append
  runs through the engine instead, so that it sees them;
- its spelling of `INSERT … ON CONFLICT DO NOTHING`; and no cross-replica lock, since one
  machine serves the file and every write is serialised anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Column, ColumnElement, Table, create_engine, event, insert
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Engine, ExceptionContext, RowMapping, make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.dml import Insert

from app.errors import Rejected, StorageUnavailable
from app.settings import Settings
from app.storage import schema, tail
from app.storage.changes import Changes, take_touched
from app.storage.dialect import Dialect, Engines
from app.storage.errors import translated_errors
from app.storage.generations import signatures
from app.storage.transactions import Checkouts, Committed, Transactions, Work
from app.storage.wakeups import LocalCommits, Wakeable, WakeupSource

T = TypeVar("T")

log = logging.getLogger(__name__)

_BEGIN = "eventlog_sqlite_begin"

# The async engine's pool for a file: reads and revision checks. Writes do not use it:
# they run on the writer thread's own connection. Fifteen kept connections and no
# overflow, where SQLAlchemy's default is 5 + 10: an overflow connection is closed at
# check-in, so under steady concurrent reads some checkouts opened a connection (a thread,
# the file, the pragmas) and ran a few ms behind the rest (read p99.9 79-92 ms against
# 67-75 ms for 15 + 0, 45 callers on a loaded event loop), which is also what let a read
# be overtaken by more than the callers ahead of it (tests/storage/test_checkouts.py, once
# in CI). PostgreSQL's default is the same shape (20 + 0). (An in-memory database gets one
# shared connection, as SQLAlchemy would choose for its URL.)
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
        driver = conn.connection.dbapi_connection
        if not isinstance(driver, sqlite3.Connection) or conn.dispatch.before_cursor_execute:
            # Not the writer thread's engine, or something watches the engine's statements
            # (tracing: a span per statement): through the engine, so that it sees them.
            return tail.two_statements(conn, at)
        statements = _driver_statements(conn.dialect)
        update = statements.updates[(at.first_seq is not None, at.terminal)]
        params = at.params()
        params["b_now"] = statements.stamp(params["b_now"])
        params["b_expires_at"] = statements.stamp(params["b_expires_at"])
        params["b_lease_expires_at"] = statements.stamp(params["b_lease_expires_at"])
        cursor = driver.cursor()
        try:
            row = _run(conn, cursor, update.sql, update.values(params)).fetchone()
            if row is None:
                return None
            moved = statements.generation(row)
            first_seq = moved["tail_seq"] - len(at.batch.bodies) + 1
            rows = at.batch.values(at.generation_pk, first_seq)
            _run(conn, cursor, statements.insert, rows, many=True)
        finally:
            with contextlib.suppress(sqlite3.Error):  # closed with an invalidated connection
                cursor.close()
        return moved

    @asynccontextmanager
    async def exclusive(self, engines: Engines, key: int) -> AsyncIterator[bool]:
        """Always held: one machine serves the file, and its writes are serialised anyway."""
        yield True

    def starts_with(self, column: Column[str], prefix: str) -> ColumnElement[bool]:
        """`GLOB 'prefix*'`: SQLite's `LIKE` ignores ASCII letter case, `GLOB` does not (and
        uses the index as `LIKE` would). `*`, `?` and `[` of the prefix match themselves."""
        escaped = "".join(f"[{c}]" if c in "*?[" else c for c in prefix)
        return column.op("GLOB")(escaped + "*")


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A statement compiled once for the driver: its SQL, and its parameters in order."""

    sql: str
    names: tuple[str, ...]
    defaults: dict[str, Any]

    @classmethod
    def of(cls, statement: Any, dialect: Any) -> _Compiled:
        compiled = statement.compile(dialect=dialect)
        return cls(compiled.string, tuple(compiled.positiontup or ()), dict(compiled.params))

    def values(self, params: dict[str, Any]) -> tuple[Any, ...]:
        merged = self.defaults | params
        return tuple(merged[name] for name in self.names)


@dataclass(frozen=True, slots=True)
class _DriverStatements:
    """The common append's statements as the sqlite3 driver runs them, and the type
    processing the engine would have done around them (timestamps, booleans)."""

    updates: dict[tuple[bool, bool], _Compiled]
    insert: str
    stamp: Callable[[Any], Any]
    columns: tuple[tuple[str, Callable[[Any], Any] | None], ...]

    def generation(self, row: Sequence[Any]) -> dict[str, Any]:
        """The `generations` row the UPDATE returned, as the engine would have read it."""
        return {
            name: value if process is None or value is None else process(value)
            for (name, process), value in zip(self.columns, row, strict=True)
        }


_STATEMENTS: dict[type[Any], _DriverStatements] = {}


def _driver_statements(dialect: Any) -> _DriverStatements:
    key = type(dialect)
    found = _STATEMENTS.get(key)
    if found is None:
        compiled_insert = _Compiled.of(insert(schema.events), dialect)  # every column a parameter
        assert compiled_insert.names == tail.EVENT_COLUMNS  # the order `Batch.values` gives
        stamp = schema.UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
        found = _DriverStatements(
            updates={
                (checked, terminal): _Compiled.of(tail.tail_update_for(checked, terminal), dialect)
                for checked in (False, True)
                for terminal in (False, True)
            },
            insert=compiled_insert.sql,
            stamp=stamp if stamp is not None else (lambda value: value),
            columns=tuple(
                (c.name, c.type.dialect_impl(dialect).result_processor(dialect, None))
                for c in schema.generations.c
            ),
        )
        _STATEMENTS[key] = found
    return found


def _run(
    conn: Connection, cursor: sqlite3.Cursor, sql: str, params: Any, *, many: bool = False
) -> sqlite3.Cursor:
    """One statement on the driver's cursor; its error raised as the engine raises it."""
    try:
        return cursor.executemany(sql, params) if many else cursor.execute(sql, params)
    except sqlite3.Error as error:
        read_only = _is_read_only(error)
        if read_only:
            conn.invalidate(error)  # as the engine's `handle_error` hook has it (below)
        raise sa_exc.DBAPIError.instance(
            sql, None, error, sqlite3.Error, connection_invalidated=read_only
        ) from error


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
        # and the next write opens the file anew (issue 21, item 8).
        if _is_read_only(context.original_exception):
            context.is_disconnect = True

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(_BEGIN, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")


def _is_read_only(error: BaseException) -> bool:
    """SQLITE_READONLY (or one of its extended codes): the connection may not write."""
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.Error) and isinstance(code, int) and code & 0xFF == 8


MAX_GROUP_WRITES = 128
MAX_GROUP_WEIGHT = 10_000  # events: keeps one transaction (and the lock) short


@dataclass(slots=True)
class _Queued:
    work: Work[Any]
    weight: int
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


_Outcome = tuple[_Queued, Any, BaseException | None]
_Group = tuple[list[_Outcome], Changes]


class GroupCommit:
    """One transaction at a time per process; writes that wait meanwhile commit together."""

    def __init__(self, engine: Engine, committed: Committed) -> None:
        self._engine = engine
        self._committed = committed
        self._thread: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue[_Queued] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def own_engine(self) -> Engine | None:
        """The stdlib-driver engine the committer's thread writes through."""
        return self._engine

    async def run(self, work: Work[T], *, weight: int = 1) -> T:
        """Queue `work`; its result (or refusal) arrives once its group has committed."""
        queued = _Queued(work, weight)
        self._ensure_running().put_nowait(queued)
        result: T = await queued.future
        return result

    async def close(self) -> None:
        """Stop the committer; writes still queued are refused as unavailable."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():
            _fail(self._queue.get_nowait(), StorageUnavailable("the service is stopping"))
        if self._thread is not None:
            # A group already in the thread finishes (or rolls back) before we return.
            await asyncio.to_thread(self._thread.shutdown, wait=True)
            self._thread = None
        self._engine.dispose()

    def _ensure_running(self) -> asyncio.Queue[_Queued]:
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._task is None or self._task.done():
            # A context of its own: started inside some request, the committer must not
            # carry that request's context (its request id in every later log line).
            self._task = asyncio.create_task(
                self._commit_forever(self._queue), context=contextvars.Context()
            )
        return self._queue

    async def _commit_forever(self, queue: asyncio.Queue[_Queued]) -> None:
        while True:
            group = [await queue.get()]
            weight = group[0].weight
            while not queue.empty() and len(group) < MAX_GROUP_WRITES and weight < MAX_GROUP_WEIGHT:
                group.append(queue.get_nowait())
                weight += group[-1].weight
            await self._commit(group)

    async def _commit(self, group: list[_Queued]) -> None:
        if self._thread is None:
            # One thread: the stdlib driver's connection stays on the thread that uses it.
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="eventlog-writer")
        loop = asyncio.get_running_loop()
        running = loop.run_in_executor(self._thread, self._commit_in_thread, group)
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            # Stopping. A group in the thread cannot be interrupted: wait for it, so that
            # every caller learns whether its write committed, and only then stop.
            await asyncio.wait([running])
            self._answer(group, running)
            raise
        except Exception as error:  # the group failed as a whole; the loop goes on
            log.warning("a group of %d writes failed: %s", len(group), error)
        self._answer(group, running)

    def _commit_in_thread(self, group: list[_Queued]) -> _Group:
        outcomes: list[_Outcome] = []
        with translated_errors(), self._engine.begin() as conn:
            try:
                for queued in group:
                    try:
                        outcomes.append((queued, queued.work(conn), None))
                    except Rejected as refused:
                        # Raised by the write's checks before it wrote anything, so the other
                        # writes of its group still commit; any other error fails them all.
                        outcomes.append((queued, None, refused))
            finally:
                changed = take_touched(conn)
        return outcomes, changed

    def _answer(self, group: list[_Queued], running: asyncio.Future[_Group]) -> None:
        """Answer each caller of a finished group: only now, after COMMIT, is anything acked."""
        error = running.exception()
        if error is not None:
            for queued in group:
                _fail(queued, error)
            return
        outcomes, changed = running.result()
        self._committed(changed)
        _acknowledge(outcomes)


def _acknowledge(outcomes: list[_Outcome]) -> None:
    for queued, value, refusal in outcomes:
        if queued.future.done():  # its caller went away; the write stands regardless
            continue
        if refusal is None:
            queued.future.set_result(value)
        else:
            queued.future.set_exception(refusal)


def _fail(queued: _Queued, error: BaseException) -> None:
    if not queued.future.done():
        queued.future.set_exception(error)


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
