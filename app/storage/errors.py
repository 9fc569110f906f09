"""The storage layer's own exceptions, and the one place driver errors become them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc

from app.domain.append import Refusal


class StorageError(Exception):
    """The database failed in a way the caller cannot fix by retrying."""


class StorageUnavailable(StorageError):
    """The database is unreachable, restarting or too busy; retrying later may succeed."""


class NotFound(Exception):
    """A lookup found nothing (for this tenant)."""

    code = "not_found"


class UnknownGeneration(NotFound):
    """No generation has that token for this tenant."""

    code = "unknown_generation"


class UnknownStream(NotFound):
    """No stream has that id for this tenant."""

    code = "unknown_stream"


class AppendRefusedError(Exception):
    """An append was refused by the contract's rules (fenced, finished, out of order)."""

    def __init__(self, refusal: Refusal, detail: str) -> None:
        super().__init__(detail)
        self.refusal = refusal
        self.detail = detail


_UNAVAILABLE = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    OSError,
)


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn driver and pool errors into `StorageUnavailable` / `StorageError`."""
    try:
        yield
    except _UNAVAILABLE as error:
        raise StorageUnavailable(_describe(error)) from error
    except sa_exc.DBAPIError as error:
        if error.connection_invalidated:
            raise StorageUnavailable(_describe(error)) from error
        raise StorageError(_describe(error)) from error
    except sa_exc.SQLAlchemyError as error:
        raise StorageError(_describe(error)) from error


def _describe(error: BaseException) -> str:
    # The first line only: driver messages can carry SQL parameters, i.e. event data.
    text = str(getattr(error, "orig", None) or error)
    return text.splitlines()[0][:200] if text else type(error).__name__
