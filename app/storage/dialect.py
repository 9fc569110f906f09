"""Where SQLite and PostgreSQL differ, named once: the hooks of `Dialect`, one file per database.

One SQLAlchemy Core implementation serves both databases (`generations`, `events`,
`decisions`, `retention`: plain functions over a `Connection`). What differs is a method of
`Dialect`, implemented in `app/storage/sqlite.py` and `app/storage/postgres.py`:

- `engines`: how the engines are built, and how a consistent read is had (SQLite: pragmas,
  and a deferred transaction in WAL mode sees one snapshot; PostgreSQL: a sized pool, and
  REPEATABLE READ for the same guarantee);
- `transactions`: how writes are run (SQLite has one write lock per database, so a process
  sends its writes through one group committer; PostgreSQL locks rows, so each write is its
  own transaction, and one that changed streams tells the other replicas with NOTIFY);
- `wakeup_sources`: where a process hears of other processes' changes (PostgreSQL:
  LISTEN; SQLite: polling the file's `data_version`);
- `insert_ignore`: `INSERT … ON CONFLICT DO NOTHING`, which SQLAlchemy spells per dialect;
- `exclusive`: a lock held for a whole pass across replicas (PostgreSQL: an advisory lock;
  SQLite serves one machine and serialises every write anyway);
- `append_at_tail`: the common append as one guarded write; the shared two statements of
  `app/storage/tail.py` unless the database has a better statement for it;
- `create_task`: a new task's three rows written together; the shared three INSERTs of
  `app/storage/task_rows.py` unless the database can run them as one statement;
- `starts_with`: a case-sensitive prefix match (`LIKE`, which SQLite's is not for ASCII:
  there `GLOB`);
- `location_problem`: why the database cannot be opened, when that shows before trying
  (SQLite: a file whose folder is missing or cannot be written; PostgreSQL: nothing).

`SELECT … FOR UPDATE [SKIP LOCKED]` is not here: SQLAlchemy renders it as nothing on SQLite,
where the write transaction already holds the database lock. `app/storage/database.py`
picks the dialect for a database URL.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, ColumnElement, Table, event
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.sql.dml import Insert

from app.settings import Settings
from app.storage import tail
from app.storage.task_rows import NewTaskRows, StoredTaskRows, three_statements
from app.storage.transactions import Checkouts, Transactions
from app.storage.wakeups import LocalCommits, WakeupSource

_DIALECT = "eventlog.dialect"


@dataclass(frozen=True, slots=True)
class Engines:
    """The async engine (reads, migrations, the advisory lock), its snapshot view, and the
    turns in which their one pool's connections are handed out."""

    base: AsyncEngine
    snapshot: AsyncEngine
    checkouts: Checkouts


class Dialect(ABC):
    """The hooks where the two databases differ; everything else is shared Core SQL."""

    name: str
    """The backend name of the database URLs it serves (`sqlite`, `postgresql`)."""
    migrates_on_start: bool
    """Whether `serve` migrates the schema first unless told (one process owns a SQLite
    file; PostgreSQL replicas must not race to migrate, so there it is an explicit step)."""

    @abstractmethod
    def engines(self, settings: Settings) -> Engines:
        """Build the async engine for `settings.database_url` and its snapshot view."""

    @abstractmethod
    def transactions(
        self, settings: Settings, engines: Engines, local: LocalCommits
    ) -> Transactions:
        """How this process runs its write transactions (`local` is told after COMMIT, and
        its `origin` names what they announce to other processes)."""

    @abstractmethod
    def wakeup_sources(self, settings: Settings, local: LocalCommits) -> list[WakeupSource]:
        """Where this process hears of other processes' changes (live readers)."""

    @abstractmethod
    def insert_ignore(self, table: Table, keys: Sequence[Column[Any]]) -> Insert:
        """`INSERT INTO table … ON CONFLICT (keys) DO NOTHING`."""

    @abstractmethod
    def exclusive(self, engines: Engines, key: int) -> AbstractAsyncContextManager[bool]:
        """Hold the lock `key` across replicas for a block; yields False when another
        process holds it."""

    def append_at_tail(self, conn: Connection, at: tail.AtTail) -> RowMapping | None:
        """The common append as one guarded write: the generation's row as the write left
        it, or None, having written nothing, when the contract's rules do not let it
        through as it stands (the caller then takes the full path).

        Shared: one `UPDATE … RETURNING`, then one INSERT (`tail.two_statements`).
        """
        return tail.two_statements(conn, at)

    def create_task(self, conn: Connection, rows: NewTaskRows) -> StoredTaskRows:
        """Write a new task's stream, first generation and task row; their rows as stored.

        Shared: one `INSERT … RETURNING` per row (`task_rows.three_statements`).
        """
        return three_statements(conn, rows)

    def starts_with(self, column: Column[str], prefix: str) -> ColumnElement[bool]:
        """`column` begins with `prefix`, letter case included (the admin listing's filter).

        Shared: `LIKE 'prefix%'` with the prefix's wildcards escaped.
        """
        return column.startswith(prefix, autoescape=True)

    def location_problem(self, database_url: str) -> str | None:
        """Why the database at `database_url` cannot be opened and written, in one line
        that names the fix, when that can be told without connecting; None otherwise.

        Shared: nothing (a server's database is known only by connecting to it).
        """
        return None

    def bind(self, engine: Engine) -> None:
        """Make this the dialect `dialect_of` finds on every connection of `engine`."""

        @event.listens_for(engine, "connect")
        def _mark(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
            record.info[_DIALECT] = self


def dialect_of(conn: Connection) -> Dialect:
    """The hooks of the database `conn` is on (its engine was bound by `Dialect.bind`)."""
    dialect: Dialect = conn.info[_DIALECT]
    return dialect
