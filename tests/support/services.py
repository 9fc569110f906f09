"""The service layer's use cases without the app: on a database, built from exactly the
settings slices they take (tests/service/test_eventlog.py, test_tasks.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.service.eventlog import EventLogService, WriteLimits
from app.service.observer import Observer
from app.service.reading import ReadPath
from app.settings.slices import BodyLimits, PageLimits
from app.storage.database import Database
from tests.support.app import make_settings

PAGES = PageLimits(default_limit=10, max_limit=100, max_bytes=10**6)


def default_bodies(**limits: int) -> BodyLimits:
    """The default body limits, with `limits` in place of theirs."""
    return make_settings("sqlite+aiosqlite://").bodies.model_copy(update=limits)


@asynccontextmanager
async def opened_database(database_url: str) -> AsyncIterator[Database]:
    """A `Database` on `database_url` (default settings), closed at the end."""
    database = Database(make_settings(database_url))
    try:
        yield database
    finally:
        await database.close()


def writer_service(database: Database, limits: WriteLimits) -> EventLogService:
    """The writer API on `database` with `limits` (its read path on the same stream rules)."""
    reads = ReadPath(database, limits.streams, PAGES)
    return EventLogService(database, reads, limits, Observer())
