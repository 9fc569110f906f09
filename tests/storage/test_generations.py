"""What a `Database` knows of the generations it has seen (for appends without a read) is its
own: another `Database` of the same process starts knowing nothing, and a connection outside
any `Database` keeps nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import create_engine

from app.domain.ids import StreamKey
from app.settings import Settings
from app.storage import generations
from app.storage.database import Database
from app.storage.generations import KnownGenerations, NewGeneration
from tests.storage.fakes import generation_record

NOW = datetime(2026, 12, 3, tzinfo=UTC)
OPENING = NewGeneration(reason=None, producer="p", max_events=10, ttl_seconds=60)


async def test_each_database_knows_only_the_generations_it_has_seen(settings: Settings) -> None:
    first, second = Database(settings), Database(settings)
    try:
        gen = await first.write(
            lambda c: generations.open_generation(c, StreamKey("t", "s.known"), OPENING, NOW)
        )
        known = await first.read(lambda c: generations.remembered(c, gen.token, "t"))
        assert known is not None
        assert (known.pk, known.stream_pk, known.ttl_seconds) == (gen.pk, gen.stream_pk, 60)
        assert await first.read(lambda c: generations.remembered(c, gen.token, "other")) is None
        assert await second.read(lambda c: generations.remembered(c, gen.token, "t")) is None
    finally:
        await first.close()
        await second.close()


def test_the_set_is_bounded_and_a_bare_connection_keeps_nothing() -> None:
    gen = generation_record()
    known = KnownGenerations(most=2)
    known.put(gen)
    assert known.get("tok", "t") is not None
    for token in ("a", "b"):  # full: cleared before the next one is kept
        known.put(replace(gen, token=token))
    assert known.get("tok", "t") is None
    assert known.get("b", "t") is not None
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        generations.remember(conn, gen)
        assert generations.remembered(conn, "tok", "t") is None
    engine.dispose()
