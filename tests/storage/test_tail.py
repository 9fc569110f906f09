"""The append's two paths agree: the common append at the tail (one guarded write, for
generations this process has seen: the shared `UPDATE … RETURNING` and INSERT, and a
database's own statement where its dialect has one) gives exactly what the full path (read
the row, apply the domain's rules, write) gives, for every mix of in-order and out-of-order
appends, retries, finishes, supersedes, eviction and tenants, on each database."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Connection

from app.domain.append import EventBody
from app.domain.ids import StreamKey
from app.errors import ConflictingBatch, NotFound
from app.settings import Settings
from app.storage import events, generations
from app.storage.database import Database, dialect_for
from app.storage.dialect import Dialect
from app.storage.schema import events as events_table
from app.storage.schema import generations as generations_table
from app.storage.schema import streams

T0 = datetime(2026, 11, 30, tzinfo=UTC)


async def _script(settings: Settings, seed: int) -> list[Any]:
    """Run one random script of writes; what each write answered, then what is stored."""
    rng = random.Random(seed)
    db = Database(settings)
    outcomes: list[Any] = []
    tokens: list[str] = []
    owner: dict[str, str] = {}
    try:
        for step in range(120):
            now = T0 + timedelta(seconds=step)
            if not tokens or rng.random() < 0.06:
                opening = generations.NewGeneration(
                    reason=None, producer="p", max_events=rng.choice([3, 50, 50]), ttl_seconds=60
                )
                key = StreamKey(rng.choice(["a", "b"]), f"s{rng.randrange(2)}")
                gen = await db.write(
                    lambda c, k=key, o=opening, n=now: generations.open_generation(c, k, o, n)
                )
                tokens.append(gen.token)
                owner[gen.token] = key.tenant
                outcomes.append(("open", gen.epoch))
                continue
            token = tokens[-1] if rng.random() < 0.7 else rng.choice(tokens)
            tail = (await db.read(lambda c, t=token: generations.get(c, t))).tail_seq
            first_seq = rng.choice([None] * 3 + [tail + 1] * 3 + [tail, tail + 2, max(1, tail - 1)])
            count = rng.choice([0, 1, 1, 1, 2, 3])
            batch = [EventBody(f"d{step}.{i}", rng.choice([None, "message"])) for i in range(count)]
            terminal = rng.random() < 0.05
            tenant = owner[token] if rng.random() < 0.9 else "c"

            args = (tenant, token, batch)
            kw = {"first_seq": first_seq, "terminal": terminal, "now": now}
            try:
                result = await db.write(lambda c, a=args, k=kw: events.append(c, *a, **k))
            except ConflictingBatch as conflicting:
                outcomes.append(("refused", conflicting.conflict))
            except NotFound:
                outcomes.append(("unknown",))
            else:
                ids = ("pk", "token", "stream_pk", "supersedes")
                record = asdict(result.generation) | dict.fromkeys(ids)
                outcomes.append((result.first_seq, result.count, result.duplicate, record))
        outcomes.append(await db.read(_stored))
    finally:
        await db.close()
    return outcomes


def _stored(conn: Connection) -> list[tuple[Any, ...]]:
    e, g, s = events_table, generations_table, streams
    query = (
        select(s.c.tenant, s.c.stream_id, g.c.epoch, e.c.seq, e.c.event, e.c.data, e.c.nbytes)
        .join(g, g.c.id == e.c.generation_pk)
        .join(s, s.c.id == g.c.stream_pk)
        .order_by(s.c.tenant, s.c.stream_id, g.c.epoch, e.c.seq)
    )
    return [tuple(row) for row in conn.execute(query)]


@pytest.mark.parametrize("seed", range(4))
async def test_the_fast_path_answers_as_the_full_path_does(
    seed: int, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool] = []
    at_tail = events._append_at_tail

    def counted(*args: Any) -> Any:
        result = at_tail(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(events, "_append_at_tail", counted)
    # The script with the fast path off: every append reads first.
    with monkeypatch.context() as off:
        off.setattr(generations, "remembered", lambda _conn, _token, _tenant: None)
        full = await _script(settings, seed)
    assert taken.count(True) == 0
    # The same script on an empty database through each way the database can write the
    # common append: the shared statements and, where it has one, its own.
    for way, statement in _tail_statements(settings).items():
        await _empty(settings)
        taken.clear()
        with monkeypatch.context() as through:
            through.setattr(type(dialect_for(settings.database_url)), "append_at_tail", statement)
            fast = await _script(settings, seed)
        assert taken.count(True) >= 10, way  # the script does exercise the fast path, and the other
        assert taken.count(False) >= 10, way
        assert full == fast, way


def _tail_statements(settings: Settings) -> dict[str, Callable[..., Any]]:
    """The shared common append (`tail.two_statements`), and the database's own statement
    for it when its dialect overrides `Dialect.append_at_tail`."""
    own = type(dialect_for(settings.database_url)).append_at_tail
    return {hook.__qualname__: hook for hook in (Dialect.append_at_tail, own)}


async def _empty(settings: Settings) -> None:
    db = Database(settings)
    try:
        await db.write(_delete_everything)
    finally:
        await db.close()


def _delete_everything(conn: Connection) -> None:
    for table in ("events", "generations", "streams"):
        conn.exec_driver_sql(f"DELETE FROM {table}")
