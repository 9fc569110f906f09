"""A generation's events: appending (with eviction), reading pages, deleting purged ones.

Functions over a synchronous `Connection`, inside the caller's transaction (see
`app/storage/generations.py`). Every refusal of an append is raised before its first write,
so on SQLite a refused write leaves the rest of its commit group intact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Connection

from app.domain.append import EventBody, NotAppended, overlap, plan_append
from app.errors import ConflictingBatch
from app.storage import generations
from app.storage.changes import TailAppend, touched
from app.storage.dialect import dialect_of
from app.storage.records import AppendResult, EventPage, EventRecord, GenerationRecord, Tombstoned
from app.storage.schema import events
from app.storage.tail import AtTail, Batch, insert_events

# Pages are read in chunks so that a page's memory is bounded by its byte budget, not by
# its event count times the largest event allowed.
_READ_CHUNK = 256

# Events deleted per transaction when a tombstone's events are purged: small enough that an
# append waiting behind the delete (SQLite's database lock) waits milliseconds, not seconds.
DELETE_CHUNK = 2_000


def append(
    conn: Connection,
    tenant: str,
    token: str,
    bodies: Sequence[EventBody],
    *,
    first_seq: int | None,
    terminal: bool,
    now: datetime,
) -> AppendResult:
    """Store a batch atomically, or recognise it as a retry, or refuse it.

    The common append is tried first, in one guarded write at the tail
    (`app/storage/tail.py`); anything else reads the generation under its lock and
    applies the domain's rules.
    """
    batch = Batch.of(bodies)
    fast = _append_at_tail(conn, tenant, token, batch, first_seq, terminal, now)
    if fast is not None:
        return fast
    gen = generations.get(conn, token, tenant=tenant, lock=True)
    generations.remember(conn, gen)
    state = generations.state_at(gen, now)
    claimed = overlap(state, first_seq, len(bodies))
    stored = _bodies(conn, gen.pk, claimed) if claimed else {}
    plan = plan_append(state, bodies, first_seq=first_seq, terminal=terminal, stored=stored)
    if isinstance(plan, NotAppended):
        raise ConflictingBatch(plan.conflict, plan.detail)
    if plan.duplicate:
        return AppendResult(gen, plan.first_seq, plan.count, duplicate=True)
    if bodies:
        insert_events(conn, batch.rows(gen.pk, plan.first_seq))
    updated = _advance(conn, gen, plan.last_seq, batch.nbytes, terminal, now)
    touched(conn, gen.stream_pk, _appended(updated, batch, plan.first_seq))
    evicted = updated.head_seq - gen.head_seq
    return AppendResult(updated, plan.first_seq, plan.count, duplicate=False, evicted=evicted)


def _append_at_tail(
    conn: Connection,
    tenant: str,
    token: str,
    batch: Batch,
    first_seq: int | None,
    terminal: bool,
    now: datetime,
) -> AppendResult | None:
    """The common append in the database's way (`Dialect.append_at_tail`), for a generation
    this process has seen; None (nothing written) when it needs the full path."""
    known = generations.remembered(conn, token, tenant)
    if known is None or not batch.bodies:
        return None
    expires_at = now + timedelta(seconds=known.ttl_seconds)
    lease_expires_at = now + timedelta(seconds=known.lease_seconds)
    at = AtTail(known.pk, token, batch, first_seq, terminal, now, expires_at, lease_expires_at)
    row = dialect_of(conn).append_at_tail(conn, at)
    if row is None:
        return None
    gen = known.record(row)
    start = gen.tail_seq - len(batch.bodies) + 1
    touched(conn, gen.stream_pk, _appended(gen, batch, start))
    return AppendResult(gen, start, len(batch.bodies), duplicate=False, evicted=0)


def _appended(gen: GenerationRecord, batch: Batch, first_seq: int) -> TailAppend | None:
    return TailAppend(gen, batch.records(first_seq)) if batch.bodies else None


def _bodies(conn: Connection, gen_pk: int, seqs: range) -> dict[int, EventBody]:
    rows = conn.execute(
        select(events.c.seq, events.c.event, events.c.data).where(
            events.c.generation_pk == gen_pk,
            events.c.seq >= seqs.start,
            events.c.seq < seqs.stop,
        )
    )
    return {row.seq: EventBody(data=row.data, event=row.event) for row in rows}


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
    if gen.lease_expires_at is not None:  # renewed by every append (none before leases)
        values["lease_expires_at"] = now + timedelta(seconds=gen.lease_seconds)
    if terminal:
        values |= {"terminal": True, "terminal_seq": tail, "terminal_at": now}
    generations.update_generation(conn, gen.pk, values)
    return replace(gen, **values)


def read_page(
    conn: Connection, gen: GenerationRecord, *, after: int, limit: int, max_bytes: int
) -> EventPage:
    """Events with seq in (after, …], at most `limit` of them and about `max_bytes`.

    The page always holds at least one event when any is due, so a single event larger
    than `max_bytes` is still delivered. `through` is the last seq the page covers; a
    missing seq in between shows as `EventPage.contiguous` being False.
    """
    upto = min(after + limit, gen.tail_seq)
    collected: list[EventRecord] = []
    size = 0
    cursor = after
    while cursor < upto:
        rows = conn.execute(
            select(events.c.seq, events.c.event, events.c.data, events.c.nbytes)
            .where(
                events.c.generation_pk == gen.pk,
                events.c.seq > cursor,
                events.c.seq <= upto,
            )
            .order_by(events.c.seq)
            .limit(_READ_CHUNK)
        ).all()
        for row in rows:
            if collected and size + row.nbytes > max_bytes:
                return EventPage(after, collected[-1].seq, tuple(collected))
            collected.append(EventRecord(row.seq, row.event, row.data))
            size += row.nbytes
        if len(rows) < _READ_CHUNK:
            break
        cursor = rows[-1].seq
    return EventPage(after, upto, tuple(collected))


def delete_chunk(conn: Connection, tomb: Tombstoned) -> int:
    """Delete up to `DELETE_CHUNK` of a tombstone's events (through its tail at marking)."""
    owned = events.c.generation_pk == tomb.pk, events.c.seq <= tomb.tail_seq
    lowest = conn.execute(select(func.min(events.c.seq)).where(*owned)).scalar_one()
    if lowest is None:
        return 0
    result = conn.execute(delete(events).where(*owned, events.c.seq < lowest + DELETE_CHUNK))
    return int(result.rowcount)
