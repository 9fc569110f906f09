"""Whether the database answers, and at which schema revision (for `/readyz`)."""

from __future__ import annotations

from app.storage.engine import Engines
from app.storage.errors import translated_errors
from app.storage.migrate import current_revision


async def database_revision(engines: Engines) -> str | None:
    """The schema revision of the database; `StorageUnavailable` when it does not answer."""
    with translated_errors():
        async with engines.base.connect() as conn:
            return await conn.run_sync(current_revision)
