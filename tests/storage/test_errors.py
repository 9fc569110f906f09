"""Driver and pool errors become the storage errors of `app/errors.py` in one place: what the
database cannot do now is `StorageUnavailable` (a retry may pass), anything else
`StorageFailed`; a message carries its first line only."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import exc as sa_exc

from app.errors import EventLogError, StorageFailed, StorageUnavailable
from app.storage.errors import is_read_only, translated_errors


class _Orig(Exception):
    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _translated(error: BaseException) -> BaseException:
    with pytest.raises(EventLogError) as caught, translated_errors():
        raise error
    return caught.value


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (sa_exc.OperationalError("SELECT", {}, _Orig("gone")), StorageUnavailable),
        (sa_exc.TimeoutError("pool"), StorageUnavailable),
        (ConnectionResetError("reset"), StorageUnavailable),
        (sa_exc.DBAPIError("SELECT", {}, _Orig("too many", "53300")), StorageUnavailable),
        (sa_exc.DBAPIError("SELECT", {}, _Orig("deadlock", "40P01")), StorageUnavailable),
        (sa_exc.IntegrityError("INSERT", {}, _Orig("duplicate key", "23505")), StorageFailed),
        (sa_exc.ArgumentError("bad"), StorageFailed),
    ],
)
def test_each_driver_error_becomes_a_storage_error(error: BaseException, kind: type) -> None:
    assert type(_translated(error)) is kind


def test_a_message_keeps_its_first_line_only() -> None:
    error = sa_exc.IntegrityError("INSERT", {}, _Orig("duplicate key\nDETAIL: secret data"))
    assert "secret" not in str(_translated(error))


def test_only_sqlite_read_only_codes_are_read_only() -> None:
    read_only = sqlite3.OperationalError("attempt to write a readonly database")
    read_only.sqlite_errorcode = 8 | (5 << 8)  # SQLITE_READONLY_DBMOVED
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = 5
    assert is_read_only(read_only)
    assert not is_read_only(busy)
    assert not is_read_only(OSError("read-only file system"))
