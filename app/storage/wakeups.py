"""Wake-ups for live readers: which streams changed, told as soon as it is committed.

Every write that changes a stream (open, append, terminate, tombstone) marks it with
`touched(conn, stream_pk)` inside its transaction. The transaction runner takes the set
before COMMIT and gives it to the dialect (PostgreSQL: `pg_notify`, which reaches every
listening replica if, and only if, the transaction commits), and after COMMIT to this
process's `LocalCommits`. A wake-up only says "read again": the tables stay the only
source of truth, so a lost or late wake-up can delay an event, never lose or reorder it.

Where wake-ups come from is one small interface, `WakeupSource`, one implementation per
source: `LocalCommits` (this process's own writes), `PostgresNotifications` (LISTEN on one
connection per process, re-listened after the database comes back, with a wake-up of
everyone to catch up on what was missed), and `SqliteDataVersion` (other processes on the
same SQLite file, noticed by polling `PRAGMA data_version` at a bounded interval).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import asyncpg
from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection, Engine, make_url

from app.storage.records import EventRecord, GenerationRecord
from app.storage.schema import generations

log = logging.getLogger(__name__)

T = TypeVar("T")

CHANNEL = "eventlog"
_TOUCHED = "eventlog.touched"
# NOTIFY payloads must stay under 8000 bytes: "<origin>;<sent_at>;pk,pk,…" in chunks well
# below it. The origin names the sending `Database` (its `LocalCommits`): its own readers
# were woken at COMMIT, so it skips its own notifications instead of waking them twice.
_PAYLOAD_PKS = 500
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")


@dataclass(frozen=True, slots=True)
class Appended:
    """Events a transaction appended at the tail of one generation, and that generation
    as the transaction left it: this process's readers get them without reading them back."""

    generation: GenerationRecord
    events: tuple[EventRecord, ...]

    @property
    def after(self) -> int:
        """The seq just before the first of the events."""
        return self.events[0].seq - 1


Changes = dict[int, Appended | None]
"""The streams a transaction changed; for each, what it appended when that is all it did."""


def touched(conn: Connection, stream_pk: int, appended: Appended | None = None) -> None:
    """Note that the running transaction changed the stream `stream_pk` (by `appended`,
    when that is the change: two appends in a row to one generation still are)."""
    changes: Changes = conn.info.setdefault(_TOUCHED, {})
    if stream_pk not in changes:
        changes[stream_pk] = appended
        return
    before = changes[stream_pk]
    follows = (
        before is not None
        and appended is not None
        and before.generation.token == appended.generation.token
        and before.events[-1].seq == appended.after
    )
    changes[stream_pk] = (
        Appended(appended.generation, before.events + appended.events)
        if follows and before is not None and appended is not None
        else None
    )


def take_touched(conn: Connection) -> Changes:
    """The streams the running transaction changed (and forget them: the next one starts clean)."""
    changes: Changes = conn.info.pop(_TOUCHED, {})
    return changes


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


class Wakeable(Protocol):
    """What a wake-up source tells (the live readers' hub)."""

    def wake(
        self,
        stream_pks: Collection[int] | None,
        sent_at: float | None = None,
        *,
        appended: Changes | None = None,
    ) -> None:
        """These streams changed (None: any may have); `sent_at` is when, if known;
        `appended`: what this process's own commit appended to them."""

    def watched(self) -> Collection[int]:
        """The streams some reader in this process follows now."""

    def source_up(self, source: str, up: bool) -> None:
        """A source connected (or lost its connection)."""


class WakeupSource(Protocol):
    """One place wake-ups come from; `run` tells `hub` about changes until cancelled."""

    name: str

    async def run(self, hub: Wakeable) -> None: ...


class LocalCommits:
    """This process's own commits (the transaction runner calls `committed` after COMMIT)."""

    name = "local"

    def __init__(self) -> None:
        self._hubs: list[Wakeable] = []
        self.origin = uuid.uuid4().hex[:16]
        """Names this database's notifications, so that it can skip its own."""

    def committed(self, changes: Changes) -> None:
        """Wake the readers of the streams a committed transaction changed."""
        if changes:
            for hub in self._hubs:
                hub.wake(changes, time.time(), appended=changes)

    async def run(self, hub: Wakeable) -> None:
        self._hubs.append(hub)
        try:
            await asyncio.Event().wait()  # nothing to poll: `committed` is called directly
        finally:
            self._hubs.remove(hub)


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
        delay = 0.1
        while True:
            try:
                await self._listen(hub)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as error:
                log.warning("live listener lost the database (%s); again in %.1fs", error, delay)
            hub.source_up(self.name, False)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry_max)

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


def signatures(conn: Connection, stream_pks: Iterable[int]) -> dict[int, tuple[int, ...]]:
    """Per stream, numbers that change whenever any of its generations changes.

    Tails and heads only grow and every state mark only appears, so a sum or a count of
    them moves on every append, eviction, terminal mark, supersede and tombstone.
    """
    g = generations.c
    query = (
        select(
            g.stream_pk,
            func.count(),
            func.sum(g.tail_seq),
            func.sum(g.head_seq),
            func.count(g.terminal_at),
            func.count(g.superseded_at),
            func.count(g.expired_at),
        )
        .where(g.stream_pk.in_(list(stream_pks)))
        .group_by(g.stream_pk)
    )
    return {row[0]: tuple(int(v or 0) for v in row[1:]) for row in conn.execute(query)}


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
