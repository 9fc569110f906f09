"""The append's two paths agree: the common append at the tail (one guarded
`UPDATE … RETURNING` and one INSERT, for generations this process has seen) gives exactly
what the full path (read the row, apply the domain's rules, write) gives, for every mix of
in-order and out-of-order appends, retries, finishes, supersedes, eviction and tenants."""

from __future__ import annotations

import random
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
from app.storage.database import Database
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
    fast = await _script(settings, seed)
    assert taken.count(True) >= 10  # the script does exercise the fast path, and the other
    assert taken.count(False) >= 10
    # The same script on an empty database with the fast path off: every append reads first.
    await _empty(settings)
    monkeypatch.setattr(generations, "remembered", lambda _token, _tenant: None)
    taken.clear()
    full = await _script(settings, seed)
    assert taken.count(True) == 0
    assert full == fast


async def _empty(settings: Settings) -> None:
    db = Database(settings)
    try:
        await db.write(_delete_everything)
    finally:
        await db.close()


def _delete_everything(conn: Connection) -> None:
    for table in ("events", "generations", "streams"):
        conn.exec_driver_sql(f"DELETE FROM {table}")
