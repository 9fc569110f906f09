"""The two hot writes, opening a generation and appending to one, as plain functions.

They take a synchronous `Connection` so that one implementation serves both ways a write
is run (see `app/storage/writer.py`): on SQLite a whole group of them runs in the
writer's own thread; on PostgreSQL each runs through `AsyncConnection.run_sync`. Every
refusal is raised before the first write, so a refused write leaves its group intact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from app.domain.append import (
    AppendRefused,
    EventBody,
    GenerationState,
    overlap,
    plan_append,
)
from app.domain.ids import new_token
from app.storage.errors import AppendRefusedError, UnknownGeneration
from app.storage.generations import select_generation, to_generation
from app.storage.records import AppendResult, GenerationRecord
from app.storage.schema import events, generations, streams


@dataclass(frozen=True, slots=True)
class NewGeneration:
    """What a writer asks for when it opens a generation."""

    reason: str | None
    producer: str | None
    max_events: int
    ttl_seconds: int


def open_generation(
    conn: Connection, tenant: str, stream_id: str, request: NewGeneration, now: datetime
) -> GenerationRecord:
    """Create the stream if needed, supersede its current generation, open a new one."""
    conn.execute(
        _insert_ignore(conn).values(
            tenant=tenant, stream_id=stream_id, last_epoch=0, created_at=now, updated_at=now
        )
    )
    # The stream row's lock serialises opens: epochs stay distinct, one is current.
    stream = conn.execute(
        select(streams.c.id, streams.c.last_epoch)
        .where(streams.c.tenant == tenant, streams.c.stream_id == stream_id)
        .with_for_update()
    ).one()
    epoch = stream.last_epoch + 1
    previous = _supersede(conn, stream.id, stream.last_epoch, now)
    token = new_token()
    conn.execute(
        insert(generations).values(
            token=token,
            stream_pk=stream.id,
            epoch=epoch,
            reason=request.reason or ("initial" if epoch == 1 else "reset"),
            producer=request.producer,
            head_seq=1,
            tail_seq=0,
            retained_events=0,
            retained_bytes=0,
            terminal=False,
            terminal_seq=None,
            max_events=request.max_events,
            ttl_seconds=request.ttl_seconds,
            supersedes=previous,
            created_at=now,
            last_append_at=now,
            expires_at=now + timedelta(seconds=request.ttl_seconds),
        )
    )
    conn.execute(
        update(streams).where(streams.c.id == stream.id).values(last_epoch=epoch, updated_at=now)
    )
    return _generation(conn, tenant, token, lock=False)


def append(
    conn: Connection,
    tenant: str,
    token: str,
    batch: Sequence[EventBody],
    *,
    first_seq: int | None,
    terminal: bool,
    now: datetime,
) -> AppendResult:
    """Store a batch atomically, or recognise it as a retry, or refuse it."""
    gen = _generation(conn, tenant, token, lock=True)
    state = GenerationState(
        head_seq=gen.head_seq,
        tail_seq=gen.tail_seq,
        current=gen.current,
        terminal=gen.terminal,
        terminal_seq=gen.terminal_seq,
        expired=gen.expired,
    )
    claimed = overlap(state, first_seq, len(batch))
    stored = _bodies(conn, gen.pk, claimed) if claimed else {}
    plan = plan_append(state, batch, first_seq=first_seq, terminal=terminal, stored=stored)
    if isinstance(plan, AppendRefused):
        raise AppendRefusedError(plan.refusal, plan.detail)
    if plan.duplicate:
        return AppendResult(gen, plan.first_seq, plan.count, duplicate=True)
    rows = _event_rows(gen.pk, plan.first_seq, batch)
    if rows:
        conn.execute(insert(events), rows)
    appended_bytes = sum(row["nbytes"] for row in rows)
    updated = _advance(conn, gen, plan.last_seq, appended_bytes, terminal, now)
    evicted = updated.head_seq - gen.head_seq
    return AppendResult(updated, plan.first_seq, plan.count, duplicate=False, evicted=evicted)


def _insert_ignore(conn: Connection) -> Any:
    """`INSERT … ON CONFLICT DO NOTHING` into streams, in the connection's dialect."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(streams).on_conflict_do_nothing(
        index_elements=[streams.c.tenant, streams.c.stream_id]
    )


def _supersede(conn: Connection, stream_pk: int, epoch: int, now: datetime) -> str | None:
    if epoch == 0:
        return None
    result = conn.execute(
        update(generations)
        .where(generations.c.stream_pk == stream_pk, generations.c.epoch == epoch)
        .values(superseded_at=now)
        .returning(generations.c.token)
    )
    token: str | None = result.scalar_one_or_none()
    return token


def _generation(conn: Connection, tenant: str, token: str, *, lock: bool) -> GenerationRecord:
    query = select_generation(tenant, token=token)
    if lock:
        # Appends to one generation serialise on its row (PostgreSQL); on SQLite the
        # write transaction already holds the database lock and this renders as nothing.
        query = query.with_for_update(of=generations)
    row = conn.execute(query).one_or_none()
    if row is None:
        raise UnknownGeneration(token)
    return to_generation(row._mapping)


def _bodies(conn: Connection, gen_pk: int, seqs: range) -> dict[int, EventBody]:
    rows = conn.execute(
        select(events.c.seq, events.c.event, events.c.data).where(
            events.c.generation_pk == gen_pk,
            events.c.seq >= seqs.start,
            events.c.seq < seqs.stop,
        )
    )
    return {row.seq: EventBody(data=row.data, event=row.event) for row in rows}


def _event_rows(gen_pk: int, first_seq: int, batch: Sequence[EventBody]) -> list[dict[str, Any]]:
    return [
        {
            "generation_pk": gen_pk,
            "seq": seq,
            "event": body.event,
            "data": body.data,
            "nbytes": len(body.data.encode()),
        }
        for seq, body in enumerate(batch, start=first_seq)
    ]


def _advance(
    conn: Connection,
    gen: GenerationRecord,
    tail: int,
    appended_bytes: int,
    terminal: bool,
    now: datetime,
) -> GenerationRecord:
    """Move the tail, evict past `max_events` in the same transaction, mark terminal."""
    head = gen.head_seq
    retained = gen.retained_events + (tail - gen.tail_seq)
    retained_bytes = gen.retained_bytes + appended_bytes
    if tail - head + 1 > gen.max_events:
        new_head = tail - gen.max_events + 1
        evicted = events.c.generation_pk == gen.pk, events.c.seq < new_head
        evicted_bytes = conn.execute(
            select(func.coalesce(func.sum(events.c.nbytes), 0)).where(*evicted)
        ).scalar_one()
        removed = conn.execute(delete(events).where(*evicted)).rowcount
        head, retained = new_head, retained - removed
        retained_bytes -= evicted_bytes
    values: dict[str, Any] = {
        "head_seq": head,
        "tail_seq": tail,
        "retained_events": retained,
        "retained_bytes": retained_bytes,
        "last_append_at": now,
        "expires_at": now + timedelta(seconds=gen.ttl_seconds),
    }
    if terminal:
        values |= {"terminal": True, "terminal_seq": tail, "terminal_at": now}
    conn.execute(update(generations).where(generations.c.id == gen.pk).values(**values))
    return replace(gen, **values)
