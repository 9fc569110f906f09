"""SQLite's common append on the stdlib driver's cursor, in the writer thread.

The shared guarded `UPDATE … RETURNING` and INSERT of `tail.py`, compiled once per driver
dialect and run on the cursor, with the type processing the engine would have done around
them (timestamps, booleans); driver errors are raised as the engine would raise them
(`DBAPIError.instance`), a read-only connection invalidated. Where something listens to the
engine's statements (tracing's span per statement), or the connection is not the writer
thread's stdlib one, the append runs through the engine instead, so that it sees them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import insert
from sqlalchemy.engine import Connection, RowMapping

from app.storage import schema, tail
from app.storage.errors import is_read_only


def append_at_tail(conn: Connection, at: tail.AtTail) -> RowMapping | None:
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
        read_only = is_read_only(error)
        if read_only:
            conn.invalidate(error)  # as the engine's `handle_error` hook has it (below)
        raise sa_exc.DBAPIError.instance(
            sql, None, error, sqlite3.Error, connection_invalidated=read_only
        ) from error
