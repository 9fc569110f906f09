"""The one place driver and pool errors become the storage errors of `app/errors.py`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc

from app.errors import StorageFailed, StorageUnavailable

_UNAVAILABLE = (
    # A connection lost inside a transaction that was not rolled back yet: the database
    # went away under it, as with the errors below.
    sa_exc.PendingRollbackError,
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    OSError,
)


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn driver and pool errors into `StorageUnavailable` / `StorageFailed`."""
    try:
        yield
    except _UNAVAILABLE as error:
        raise StorageUnavailable(_describe(error)) from error
    except sa_exc.DBAPIError as error:
        if error.connection_invalidated or _is_transient(error):
            raise StorageUnavailable(_describe(error)) from error
        raise StorageFailed(_describe(error)) from error
    except sa_exc.SQLAlchemyError as error:
        raise StorageFailed(_describe(error)) from error


# SQLSTATE classes that say "the server cannot serve you right now", not "your SQL is
# wrong": 08 connection exception, 53 insufficient resources (e.g. too many connections),
# 57 operator intervention (shutting down, starting up: 57P01-57P03), 40001/40P01
# serialization failure and deadlock (the transaction was rolled back; a retry may pass).
_TRANSIENT_SQLSTATE_CLASSES = ("08", "53", "57")
_TRANSIENT_SQLSTATES = ("40001", "40P01")


def _is_transient(error: sa_exc.DBAPIError) -> bool:
    sqlstate = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    if not isinstance(sqlstate, str):
        return False
    return sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES or sqlstate in _TRANSIENT_SQLSTATES


def _describe(error: BaseException) -> str:
    # The first line only: driver messages can carry SQL parameters, i.e. event data.
    text = str(getattr(error, "orig", None) or error)
    return text.splitlines()[0][:200] if text else type(error).__name__


def is_read_only(error: BaseException) -> bool:
    """SQLITE_READONLY (or one of its extended codes): the SQLite connection may not write."""
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.Error) and isinstance(code, int) and code & 0xFF == 8
