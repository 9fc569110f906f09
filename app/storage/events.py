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

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import ReturningUpdate

from app.domain.append import EventBody, GenerationState, NotAppended, overlap, plan_append
from app.errors import ConflictingBatch
from app.storage import generations, schema
from app.storage.records import AppendResult, EventPage, EventRecord, GenerationRecord, Tombstoned
from app.storage.schema import events
from app.storage.wakeups import Appended, touched

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
    batch: Sequence[EventBody],
    *,
    first_seq: int | None,
    terminal: bool,
    now: datetime,
) -> AppendResult:
    """Store a batch atomically, or recognise it as a retry, or refuse it."""
    fast = _append_at_tail(conn, tenant, token, batch, first_seq, terminal, now)
    if fast is not None:
        return fast
    gen = generations.get(conn, token, tenant=tenant, lock=True)
    generations.remember(gen)
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
    if isinstance(plan, NotAppended):
        raise ConflictingBatch(plan.conflict, plan.detail)
    if plan.duplicate:
        return AppendResult(gen, plan.first_seq, plan.count, duplicate=True)
    rows = _event_rows(gen.pk, plan.first_seq, batch)
    if rows:
        conn.execute(_INSERT, rows)
    appended_bytes = sum(row["nbytes"] for row in rows)
    updated = _advance(conn, gen, plan.last_seq, appended_bytes, terminal, now)
    touched(conn, gen.stream_pk, _appended(updated, rows))
    evicted = updated.head_seq - gen.head_seq
    return AppendResult(updated, plan.first_seq, plan.count, duplicate=False, evicted=evicted)


# The common append — events at the tail of a live generation, nothing to evict — is one
# `UPDATE … RETURNING` that checks every rule the contract has for it in its WHERE clause
# and moves the tail, then one INSERT. Everything else (retries, refusals, eviction, an
# empty batch, a generation this process has not seen yet) matches nothing or is not
# tried, and takes the path above, which reads the row first and applies the domain's
# rules. The statements are built once: SQLAlchemy's per-statement construction and cache
# key were most of an append's CPU (bench/results/append-path.md, section 4b).
_INSERT = insert(events)
_g = schema.generations
_APPENDABLE = (
    _g.c.id == bindparam("b_pk"),
    _g.c.token == bindparam("b_token"),
    _g.c.superseded_at.is_(None),
    _g.c.expired_at.is_(None),
    _g.c.terminal.is_(False),
    _g.c.tail_seq + bindparam("b_n") - _g.c.head_seq < _g.c.max_events,
)
_TAIL_VALUES = {
    "tail_seq": _g.c.tail_seq + bindparam("b_n"),
    "retained_events": _g.c.retained_events + bindparam("b_n"),
    "retained_bytes": _g.c.retained_bytes + bindparam("b_nbytes"),
    "last_append_at": bindparam("b_now"),
    "expires_at": bindparam("b_expires_at"),
}
_TERMINAL_VALUES = {
    "terminal": True,
    "terminal_seq": _g.c.tail_seq + bindparam("b_n"),
    "terminal_at": bindparam("b_now"),
}


def _tail_update(checked_seq: bool, terminal: bool) -> ReturningUpdate[Any]:
    where = _APPENDABLE + ((_g.c.tail_seq == bindparam("b_prev"),) if checked_seq else ())
    values = _TAIL_VALUES | (_TERMINAL_VALUES if terminal else {})
    return update(_g).where(*where).values(values).returning(*_g.c)


_TAIL_UPDATES = {(c, t): _tail_update(c, t) for c in (False, True) for t in (False, True)}


def _append_at_tail(
    conn: Connection,
    tenant: str,
    token: str,
    batch: Sequence[EventBody],
    first_seq: int | None,
    terminal: bool,
    now: datetime,
) -> AppendResult | None:
    """The common append in two statements, or None when it needs the full path."""
    known = generations.remembered(token, tenant)
    if known is None or not batch:
        return None
    nbytes = [len(body.data.encode()) for body in batch]
    params = {
        "b_pk": known.pk,
        "b_token": token,
        "b_n": len(batch),
        "b_nbytes": sum(nbytes),
        "b_now": now,
        "b_expires_at": now + timedelta(seconds=known.ttl_seconds),
        "b_prev": None if first_seq is None else first_seq - 1,
    }
    statement = _TAIL_UPDATES[(first_seq is not None, terminal)]
    row = conn.execute(statement, params).one_or_none()
    if row is None:
        return None
    gen = known.record(row._mapping)
    start = gen.tail_seq - len(batch) + 1
    rows = [
        {"generation_pk": gen.pk, "seq": seq, "event": body.event, "data": body.data}
        | {"nbytes": size}
        for seq, body, size in zip(range(start, gen.tail_seq + 1), batch, nbytes, strict=True)
    ]
    conn.execute(_INSERT, rows[0] if len(rows) == 1 else rows)
    touched(conn, gen.stream_pk, _appended(gen, rows))
    return AppendResult(gen, start, len(batch), duplicate=False, evicted=0)


def _appended(gen: GenerationRecord, rows: list[dict[str, Any]]) -> Appended | None:
    events = tuple(EventRecord(row["seq"], row["event"], row["data"]) for row in rows)
    return Appended(gen, events) if events else None


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
