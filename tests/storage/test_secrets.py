"""The `secrets` table on both databases: one value per name, whoever asks first, however
many ask at once — each asker on a database of its own (its own engine and pool), as the
replicas of one database are."""

from __future__ import annotations

import asyncio

from app.service.keys import SharedSecrets
from app.settings import Settings
from app.storage.database import Database

ASKERS = 8


async def test_racing_askers_on_separate_engines_agree_on_one_value(settings: Settings) -> None:
    databases = [Database(settings) for _ in range(ASKERS)]
    try:
        values = await asyncio.gather(
            *(SharedSecrets(database).value("race") for database in databases)
        )
        assert len(set(values)) == 1, values
        assert len(values[0]) >= 43  # 256 random bits, URL-safe
        # Asked again (a restart): the same value; another name: another value.
        assert await SharedSecrets(databases[0]).value("race") == values[0]
        assert await SharedSecrets(databases[-1]).value("other") != values[0]
    finally:
        for database in databases:
            await database.close()
