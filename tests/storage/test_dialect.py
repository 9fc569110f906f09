"""Each database's hooks are found on its connections (`dialect_of`), and the prefix match
they give keeps letter case and takes wildcards literally, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

from app.domain.ids import StreamKey
from app.settings import Settings
from app.storage import generations
from app.storage.database import Database, dialect_for
from app.storage.dialect import dialect_of

NOW = datetime(2026, 12, 3, tzinfo=UTC)
IDS = ["p.a%b", "p.aXb", "p.A_c", "p.a_c", "p.ab"]


async def test_the_hooks_are_the_databases_and_prefixes_match_literally(settings: Settings) -> None:
    db = Database(settings)
    opening = generations.NewGeneration(reason=None, producer=None, max_events=5, ttl_seconds=60)
    try:
        for stream_id in IDS:
            await db.write(
                lambda c, s=stream_id: generations.open_generation(
                    c, StreamKey("t", s), opening, NOW
                )
            )
        found = await db.read(lambda c: dialect_of(c))
        assert found is dialect_for(settings.database_url)

        async def listed(prefix: str) -> list[str]:
            streams = await db.read(lambda c: generations.list_streams(c, prefix=prefix))
            return sorted(s.stream_id for s in streams)

        assert await listed("p.a%") == ["p.a%b"]
        assert await listed("p.a_") == ["p.a_c"]
        assert await listed("p.a") == sorted(["p.a%b", "p.aXb", "p.a_c", "p.ab"])
        assert await listed("p.A") == ["p.A_c"]
    finally:
        await db.close()
