"""SQLite's common append on the driver's cursor (`app/storage/sqlite_cursor.py`): the shared
statements with the engine's types, the engine's exceptions, and the engine's way wherever
something watches its statements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import select

from app.domain.append import EventBody
from app.errors import StorageFailed, StorageUnavailable
from app.settings import Settings
from app.storage.dialect import Dialect
from app.storage.errors import translated_errors
from app.storage.schema import events as events_table
from app.storage.schema import generations as generations_table
from app.storage.schema import metadata, streams
from app.storage.sqlite import SqliteDialect, _stdlib_engine
from app.storage.tail import AtTail, Batch

T0 = datetime(2026, 11, 30, tzinfo=UTC)

T0 = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture
def sqlite_writer(tmp_path: Any) -> Any:
    """The writer thread's engine (stdlib driver) on a fresh file: one stream, one
    generation (pk 1, token `tok`), nothing appended."""
    engine = _stdlib_engine(Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'd.db'}"))
    SqliteDialect().bind(engine)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            streams.insert(),
            {"id": 1, "tenant": "t", "stream_id": "s", "last_epoch": 1}
            | {"created_at": T0, "updated_at": T0},
        )
        conn.execute(
            generations_table.insert(),
            {"id": 1, "token": "tok", "stream_pk": 1, "epoch": 1, "reason": "new"}
            | {"head_seq": 1, "tail_seq": 0, "retained_events": 0, "retained_bytes": 0}
            | {"terminal": False, "max_events": 100, "ttl_seconds": 60}
            | {"created_at": T0, "last_append_at": T0, "expires_at": T0},
        )
    yield engine
    engine.dispose()


def _at(first_seq: int | None = None) -> Any:
    batch = Batch.of([EventBody("é", "message"), EventBody("b", None)])
    later = T0 + timedelta(seconds=60)
    return AtTail(1, "tok", batch, first_seq, True, T0, later, T0 + timedelta(seconds=30))


def test_sqlite_runs_the_shared_statements_on_the_driver_with_the_engines_types(
    sqlite_writer: Any,
) -> None:
    """The row it returns is the row the engine's way returns: same values, same types."""
    with sqlite_writer.begin() as conn:
        own = SqliteDialect().append_at_tail(conn, _at(first_seq=1))
        conn.rollback()
    with sqlite_writer.begin() as conn:
        shared = Dialect.append_at_tail(SqliteDialect(), conn, _at(first_seq=1))
        assert shared is not None
        shared = dict(shared)
        stored = conn.execute(select(events_table).order_by(events_table.c.seq)).all()
    assert own == shared
    assert {k: type(v) for k, v in own.items()} == {k: type(v) for k, v in shared.items()}
    assert own["terminal"] is True
    assert (own["terminal_at"], own["tail_seq"]) == (T0, 2)
    assert [tuple(r) for r in stored] == [(1, 1, "message", "é", 2), (1, 2, None, "b", 1)]


def test_sqlite_driver_errors_are_raised_as_the_engine_raises_them(sqlite_writer: Any) -> None:
    """A driver error on the cursor: the engine's exception (so `translated_errors` makes it
    the same storage error); a read-only connection is invalidated, as the engine's hook
    does, so that the pool opens the file anew."""
    with sqlite_writer.begin() as conn:  # the rows the INSERT is about to write exist
        row = {"generation_pk": 1, "seq": 1, "data": "x", "nbytes": 1}
        conn.execute(events_table.insert(), row)
    with sqlite_writer.begin() as conn:
        with pytest.raises(sa_exc.IntegrityError) as duplicate:
            SqliteDialect().append_at_tail(conn, _at())
        conn.rollback()
    assert not duplicate.value.connection_invalidated
    assert isinstance(_translated(duplicate.value), StorageFailed)
    with sqlite_writer.connect() as conn:
        conn.exec_driver_sql("PRAGMA query_only = 1")
        with pytest.raises(sa_exc.OperationalError) as read_only:
            SqliteDialect().append_at_tail(conn, _at())
        assert conn.invalidated
    assert read_only.value.connection_invalidated
    assert isinstance(_translated(read_only.value), StorageUnavailable)
    with sqlite_writer.begin() as conn:  # a new connection: it writes again
        assert conn.exec_driver_sql("PRAGMA query_only").scalar() == 0
        conn.execute(events_table.delete())
        assert SqliteDialect().append_at_tail(conn, _at()) is not None


def _translated(error: Exception) -> Exception:
    try:
        with translated_errors():
            raise error
    except Exception as storage_error:
        return storage_error
    raise AssertionError("unreachable")


def test_sqlite_runs_the_append_through_the_engine_where_its_statements_are_watched(
    sqlite_writer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Untraced, the cursor (the engine sees no statement); with a listener on the engine's
    statements (tracing's span per statement), the engine, so that it sees both."""
    from sqlalchemy import event

    from app.storage import tail

    through_engine: list[bool] = []
    shared = tail.two_statements
    monkeypatch.setattr(
        tail, "two_statements", lambda *a: through_engine.append(True) or shared(*a)
    )
    with sqlite_writer.begin() as conn:
        assert SqliteDialect().append_at_tail(conn, _at(first_seq=1)) is not None
        conn.rollback()
    assert through_engine == []
    seen: list[str] = []
    event.listen(sqlite_writer, "before_cursor_execute", lambda *a: seen.append(a[2]))
    with sqlite_writer.begin() as conn:
        assert SqliteDialect().append_at_tail(conn, _at(first_seq=1)) is not None
    assert through_engine == [True]
    assert [s.split()[0] for s in seen] == ["BEGIN", "UPDATE", "INSERT"]
