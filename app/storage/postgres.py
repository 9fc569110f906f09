"""PostgreSQL: many replicas on one database — row locks, REPEATABLE READ, NOTIFY, advisory locks.

Everything that is PostgreSQL's alone is here, behind the hooks of `Dialect`:

- the engine: a sized pool without a ping at checkout, and REPEATABLE READ for a read that
  sees one snapshot;
- how writes run: `DirectTransactions`. PostgreSQL locks rows, so writes to different
  generations run in parallel: every write is its own transaction, run through
  `AsyncConnection.run_sync` (and once more on a fresh connection if its pooled one had
  died before COMMIT, `transactions.on_open_connection`);
- the announcement: inside a write that changed streams, `pg_notify` on one channel, which
  reaches every listening replica if, and only if, the transaction commits; the payload
  names the sending `Database` (its `LocalCommits.origin`), whose own readers were woken at
  COMMIT, so that it skips its own notifications instead of waking them twice;
- wake-ups from other replicas: `PostgresNotifications`, LISTEN on one connection per
  process, re-listened after the database comes back, with a wake-up of everyone to catch
  up on what was missed;
- its spelling of `INSERT … ON CONFLICT DO NOTHING`, and an advisory lock for a pass that
  one replica at a time runs;
- the common append in one statement (`append_at_tail`): a data-modifying CTE that moves
  the tail (the shared guarded `UPDATE … RETURNING` of `tail.py`), inserts the rows and
  calls `pg_notify`, so that an append is one round trip between BEGIN and COMMIT; a
  stream it announced is not announced again at COMMIT;
- a new task in one statement (`create_task`): a CTE of the three INSERTs of
  `task_rows.py` that announces the new stream the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
from sqlalchemy import (
    Column,
    Integer,
    Table,
    Text,
    bindparam,
    cast,
    func,
    insert,
    select,
    text,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Engine, RowMapping, make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.sql.dml import Insert

from app.domain.backoff import Backoff
from app.settings import Settings
from app.storage import schema, tail, task_rows
from app.storage.changes import Changes, take_touched
from app.storage.dialect import Dialect, Engines
from app.storage.errors import translated_errors
from app.storage.transactions import (
    Checkouts,
    Committed,
    Transactions,
    Work,
    on_open_connection,
)
from app.storage.wakeups import LocalCommits, Wakeable, WakeupSource

T = TypeVar("T")

log = logging.getLogger(__name__)

CHANNEL = "eventlog"
# NOTIFY payloads must stay under 8000 bytes: "<origin>;<sent_at>;pk,pk,…" in chunks well
# below it.
_PAYLOAD_PKS = 500
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")
# What a connection's running transaction needs for the one-statement append: the origin
# its announcements name, and the streams it announced already (not announced again).
_ORIGIN = "eventlog.origin"
_ANNOUNCED = "eventlog.announced"


class PostgresDialect(Dialect):
    """Many replicas on one database: row locks, REPEATABLE READ snapshots, advisory locks."""

    name = "postgresql"
    migrates_on_start = False

    def engines(self, settings: Settings) -> Engines:
        base = create_async_engine(
            settings.database_url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            # No ping at checkout (three round trips per transaction): a connection that
            # died while pooled fails its write before COMMIT, which is then run again on
            # a fresh one (`transactions.on_open_connection`), and so does a read.
            pool_pre_ping=False,
        )
        return Engines(
            base=base,
            snapshot=base.execution_options(isolation_level="REPEATABLE READ"),
            checkouts=Checkouts(settings.db_pool_size + settings.db_max_overflow),
        )

    def transactions(
        self, settings: Settings, engines: Engines, local: LocalCommits
    ) -> Transactions:
        return DirectTransactions(engines, local.committed, origin=local.origin)

    def wakeup_sources(self, settings: Settings, local: LocalCommits) -> list[WakeupSource]:
        return [PostgresNotifications(settings.database_url, origin=local.origin)]

    def insert_ignore(self, table: Table, keys: Sequence[Column[Any]]) -> Insert:
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(keys))

    def append_at_tail(self, conn: Connection, at: tail.AtTail) -> RowMapping | None:
        """One statement: move the tail, insert the rows, announce the stream."""
        origin = conn.info.get(_ORIGIN)
        if origin is None:  # a write outside `DirectTransactions` (nothing to announce as)
            return tail.two_statements(conn, at)
        bodies = at.batch.bodies
        params = at.params() | {
            "b_events": [body.event for body in bodies],
            "b_datas": [body.data for body in bodies],
            "b_sizes": list(at.batch.sizes),
            "b_channel": CHANNEL,
            "b_head": f"{origin};{time.time():.6f};",
        }
        statement = _ONE_STATEMENT[(at.first_seq is not None, at.terminal)]
        row = conn.execute(statement, params).one_or_none()
        if row is None:
            return None
        moved = row._mapping
        conn.info.setdefault(_ANNOUNCED, set()).add(moved["stream_pk"])
        return moved

    def create_task(
        self, conn: Connection, rows: task_rows.NewTaskRows
    ) -> task_rows.StoredTaskRows:
        """One statement: insert the stream, its generation and the task, announce the stream."""
        origin = conn.info.get(_ORIGIN)
        if origin is None:  # a write outside `DirectTransactions` (nothing to announce as)
            return task_rows.three_statements(conn, rows)
        params = rows.params() | {"b_channel": CHANNEL, "b_head": f"{origin};{time.time():.6f};"}
        row = conn.execute(_CREATE_TASK, params).one()._mapping
        generation = {name: row[f"g_{name}"] for name in _GENERATION_NAMES}
        task = {name: row[f"t_{name}"] for name in task_rows.TASK_COLUMNS}
        conn.info.setdefault(_ANNOUNCED, set()).add(generation["stream_pk"])
        return task_rows.StoredTaskRows(generation, task)

    @asynccontextmanager
    async def exclusive(self, engines: Engines, key: int) -> AsyncIterator[bool]:
        """A session-level advisory lock on a connection kept for the block: released if
        that connection dies, so a crashed replica never holds it for good."""
        with translated_errors():
            async with engines.checkouts.slot(), engines.base.connect() as conn:
                query = text("SELECT pg_try_advisory_lock(:key)")
                locked = bool((await conn.execute(query, {"key": key})).scalar_one())
                # The lock is the session's; ending the transaction keeps it, and keeps this
                # connection from sitting "idle in transaction" for the whole block.
                await conn.commit()
                try:
                    yield locked
                finally:
                    if locked:
                        await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                        await conn.commit()


class DirectTransactions:
    """Each write is its own transaction (row locks keep writers parallel); one that changed
    streams announces them with `notify`, as `origin`, before it commits."""

    def __init__(self, engines: Engines, committed: Committed, *, origin: str) -> None:
        self._engine = engines.base
        self._checkouts = engines.checkouts
        self._committed = committed
        self._origin = origin

    @property
    def own_engine(self) -> Engine | None:
        """None: writes run on the shared async engine."""
        return None

    async def run(self, work: Work[T], *, weight: int = 1) -> T:
        """Run `work` in a transaction of its own (through the async driver)."""
        with translated_errors():
            result, changed = await on_open_connection(
                self._engine, self._checkouts, lambda conn: conn.run_sync(self._unit, work)
            )
        self._committed(changed)
        return result

    def _unit(self, conn: Connection, work: Work[T]) -> tuple[T, Changes]:
        conn.info[_ORIGIN] = self._origin
        try:
            result = work(conn)
        except BaseException:
            # Forget what it touched (the next transaction on this connection starts clean),
            # unless the connection died: asking it would raise over the error that says so.
            if not conn.invalidated:
                take_touched(conn)
                conn.info.pop(_ANNOUNCED, None)
            raise
        changed = take_touched(conn)
        announced: set[int] = conn.info.pop(_ANNOUNCED, set())
        if changed.keys() - announced:
            notify(conn, changed.keys() - announced, origin=self._origin)
        return result, changed

    async def close(self) -> None:
        """Nothing to stop (the engine's pool is disposed by its owner)."""


def notify(conn: Connection, changed: Collection[int], *, origin: str) -> None:
    """Tell every listening replica, inside the transaction (PostgreSQL's `pg_notify`)."""
    pks = sorted(changed)
    head = f"{origin};{time.time():.6f};"
    for start in range(0, len(pks), _PAYLOAD_PKS):
        payload = head + ",".join(map(str, pks[start : start + _PAYLOAD_PKS]))
        conn.execute(_NOTIFY, {"channel": CHANNEL, "payload": payload})


@dataclass(frozen=True, slots=True)
class Notification:
    """What a NOTIFY payload says: which streams changed, when, and from which process."""

    stream_pks: set[int]
    sent_at: float | None
    origin: str | None


def parse_payload(payload: str) -> Notification:
    """A notification's payload; an unreadable one wakes everyone.

    "<origin>;<sent_at>;pks", or "<sent_at>;pks" from a replica of an earlier version.
    """
    parts = payload.split(";")
    origin = parts[0] if len(parts) == 3 else None
    try:
        pks = {int(pk) for pk in parts[-1].split(",") if pk}
        return Notification(pks, float(parts[-2]), origin)
    except (ValueError, IndexError):
        return Notification(set(), None, None)


class PostgresNotifications:
    """LISTEN on one connection per process; after any loss, connect again and catch up."""

    name = "postgresql"

    def __init__(
        self,
        database_url: str,
        *,
        origin: str | None = None,
        check_every: float = 5.0,
        retry_max: float = 5.0,
    ):
        url = make_url(database_url).set(drivername="postgresql")
        self._origin = origin  # notifications from it are skipped (woken at COMMIT)
        self._dsn = url.render_as_string(hide_password=False)
        self._check_every = check_every
        self._retry_max = retry_max

    async def run(self, hub: Wakeable) -> None:
        delays = Backoff(first=0.1, most=self._retry_max).pauses()
        while True:
            delay = next(delays)
            try:
                await self._listen(hub)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as error:
                log.warning("live listener lost the database (%s); again in %.1fs", error, delay)
            hub.source_up(self.name, False)
            await asyncio.sleep(delay)

    async def _listen(self, hub: Wakeable) -> None:
        conn = await asyncpg.connect(self._dsn, timeout=10)
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _conn: lost.set())

            def on_notification(_conn: object, _pid: int, _channel: str, payload: str) -> None:
                told = parse_payload(payload)
                if told.origin is None or told.origin != self._origin:
                    hub.wake(told.stream_pks or None, told.sent_at)

            await conn.add_listener(CHANNEL, on_notification)
            hub.source_up(self.name, True)
            # Anything committed while no one listened is only in the tables: read again.
            hub.wake(None)
            while not lost.is_set():
                try:
                    await asyncio.wait_for(lost.wait(), self._check_every)
                except TimeoutError:
                    # A dead peer may never close the socket: ask, with a deadline.
                    await conn.fetchval("SELECT 1", timeout=self._check_every)
        finally:
            if not conn.is_closed():
                conn.terminate()


def _one_statement(checked_seq: bool, terminal: bool) -> Any:
    """`WITH moved AS (UPDATE … RETURNING *), stored AS (INSERT … SELECT FROM moved,
    unnest(…)), told AS (SELECT pg_notify(…) FROM moved) SELECT moved.* FROM moved, told`:
    nothing is stored or told when the guarded UPDATE matches no row."""
    at = tail.AtTail(0, "", tail.Batch((), ()), 1 if checked_seq else None, terminal, *_EPOCH)
    moved = tail.tail_update(at).cte("moved")
    rows = (
        func.unnest(
            bindparam("b_events", type_=postgresql.ARRAY(Text)),
            bindparam("b_datas", type_=postgresql.ARRAY(Text)),
            bindparam("b_sizes", type_=postgresql.ARRAY(Integer)),
        )
        .table_valued("event", "data", "nbytes", with_ordinality="ord")
        .render_derived()
    )
    e = schema.events
    stored = insert(e).from_select(
        [e.c.generation_pk, e.c.seq, e.c.event, e.c.data, e.c.nbytes],
        select(
            moved.c.id,
            moved.c.tail_seq - bindparam("b_n") + rows.c.ord,
            rows.c.event,
            rows.c.data,
            rows.c.nbytes,
        ).select_from(moved.join(rows, true())),
    )
    payload = bindparam("b_head", type_=Text) + cast(moved.c.stream_pk, Text)
    told = select(func.pg_notify(bindparam("b_channel"), payload).label("told")).cte("told")
    return select(*moved.c).select_from(moved.join(told, true())).add_cte(stored.cte("stored"))


_EPOCH = (datetime.fromtimestamp(0, UTC),) * 3
_ONE_STATEMENT = {(c, t): _one_statement(c, t) for c in (False, True) for t in (False, True)}


def _create_task() -> Any:
    """`WITH s AS (INSERT INTO streams … RETURNING id), g AS (INSERT INTO generations …
    SELECT FROM s RETURNING *), t AS (INSERT INTO tasks … RETURNING *), told AS (SELECT
    pg_notify(…) FROM s) SELECT g.*, t.* FROM g, t, told` (columns labelled `g_…`, `t_…`)."""
    g = schema.generations
    s = task_rows.STREAM_INSERT.cte("s")
    values = task_rows.bound_values(g, "g", task_rows.GENERATION_COLUMNS)
    opened = (
        insert(g)
        .from_select(["stream_pk", *values], select(s.c.id, *values.values()))
        .returning(*g.c)
        .cte("g")
    )
    stored = task_rows.TASK_INSERT.cte("t")
    payload = bindparam("b_head", type_=Text) + cast(s.c.id, Text)
    told = select(func.pg_notify(bindparam("b_channel"), payload).label("told")).cte("told")
    columns = [opened.c[n].label(f"g_{n}") for n in _GENERATION_NAMES]
    columns += [stored.c[n].label(f"t_{n}") for n in task_rows.TASK_COLUMNS]
    return select(*columns).select_from(opened.join(stored, true()).join(told, true()))


_GENERATION_NAMES = tuple(c.name for c in schema.generations.columns)
_CREATE_TASK = _create_task()
