"""Values every replica of one database must agree on, kept in the database.

`SharedSecrets.value(name)` answers the value stored under `name`, drawing one (256
random bits, URL-safe) and storing it first when there is none: created once by whichever
replica asks first, then the same for every replica of that database and every restart.
Two replicas asking at once get one value (`app.storage.secrets.shared`).
"""

from __future__ import annotations

import secrets as randomness

from app.service.clock import Clock, utc_now
from app.storage import secrets
from app.storage.database import Database


class SharedSecrets:
    """Secrets shared by every replica of one database (see the module)."""

    def __init__(self, database: Database, clock: Clock = utc_now) -> None:
        self._database = database
        self._clock = clock

    async def value(self, name: str) -> str:
        """The secret `name`, created now if the database has none."""
        candidate = randomness.token_urlsafe(32)
        return await self._database.write(
            lambda conn: secrets.shared(conn, name, candidate, self._clock())
        )
