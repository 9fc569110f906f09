"""Streams and their generations: one query per question, used by every caller.

Every function takes a synchronous `Connection` and runs inside the caller's transaction
(`Database.read` / `Database.write` run it, on either database); none commits. Queries that
a writer and an operator both ask take a `tenant` option: a writer sees only its tenant's
rows, an operator (tenant None) every tenant's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, case, event, func, insert, select, tuple_, update
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.pool import ConnectionPoolEntry

from app.domain.append import GenerationState, writable
from app.domain.ids import StreamKey, new_token
from app.errors import ConflictingBatch, UnknownGeneration
from app.storage.changes import touched
from app.storage.dialect import dialect_of
from app.storage.records import Abandoned, GenerationRecord, Lease, StreamRecord, Totals
from app.storage.schema import generations, streams


@dataclass(frozen=True, slots=True)
class NewGeneration:
    """What a writer asks for when it opens a generation."""

    reason: str | None
    producer: str | None
    max_events: int
    ttl_seconds: int
    lease_seconds: int = 30
    pipeline: int = 0


@dataclass(frozen=True, slots=True)
class Known:
    """What never changes about a generation once opened: enough to append without a read."""

    pk: int
    stream_pk: int
    stream_id: str
    tenant: str
    ttl_seconds: int
    lease_seconds: int

    def record(self, row: RowMapping) -> GenerationRecord:
        """The record from a `generations` row (RETURNING) and these facts of its stream."""
        stream = {"stream_id": self.stream_id, "tenant": self.tenant}
        return GenerationRecord.from_row({**row, **stream})


_KNOWN_KEY = "eventlog.known"


class KnownGenerations:
    """The immutable facts of the generations one `Database` opened or appended to, by token.

    Bounded (cleared when full). Safe to share between that database's connections and
    threads because what it holds never changes in the database: a stale entry (a purged
    generation, a reused rowid) only makes the append's guarded UPDATE match nothing, and
    the full path then reads the row.
    """

    def __init__(self, most: int = 50_000) -> None:
        self._known: dict[str, Known] = {}
        self._most = most

    def put(self, gen: GenerationRecord) -> None:
        """Keep `gen`'s immutable facts."""
        if len(self._known) >= self._most:
            self._known.clear()
        self._known[gen.token] = Known(
            gen.pk, gen.stream_pk, gen.stream_id, gen.tenant, gen.ttl_seconds, gen.lease_seconds
        )

    def get(self, token: str, tenant: str) -> Known | None:
        """The facts kept for `token`, if seen within `tenant`."""
        known = self._known.get(token)
        return known if known is not None and known.tenant == tenant else None

    def bind(self, engine: Engine) -> None:
        """Make this the set `remember` and `remembered` use on every connection of `engine`."""

        @event.listens_for(engine, "connect")
        def _mark(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
            record.info[_KNOWN_KEY] = self


def remember(conn: Connection, gen: GenerationRecord) -> None:
    """Keep `gen`'s immutable facts for later appends to it (in the set of `conn`'s database;
    a connection outside a `Database` keeps nothing)."""
    known: KnownGenerations | None = conn.info.get(_KNOWN_KEY)
    if known is not None:
        known.put(gen)


def remembered(conn: Connection, token: str, tenant: str) -> Known | None:
    """The facts `conn`'s database kept for `token`, if it has seen it within `tenant`."""
    known: KnownGenerations | None = conn.info.get(_KNOWN_KEY)
    return None if known is None else known.get(token, tenant)


def _select() -> Select[Any]:
    return select(generations, streams.c.stream_id, streams.c.tenant).join(
        streams, streams.c.id == generations.c.stream_pk
    )


def find(
    conn: Connection, token: str, *, tenant: str | None = None, lock: bool = False
) -> GenerationRecord | None:
    """The generation with `token` (within `tenant`, if given), or None.

    `lock` takes the generation's row lock for the rest of the transaction (PostgreSQL):
    appends to one generation serialise on it. On SQLite the write transaction already
    holds the database lock and `FOR UPDATE` renders as nothing.
    """
    query = _select().where(generations.c.token == token)
    if tenant is not None:
        query = query.where(streams.c.tenant == tenant)
    if lock:
        query = query.with_for_update(of=generations)
    row = conn.execute(query).one_or_none()
    return None if row is None else GenerationRecord.from_row(row._mapping)


def get(
    conn: Connection, token: str, *, tenant: str | None = None, lock: bool = False
) -> GenerationRecord:
    """As `find`, but a missing generation is `UnknownGeneration`."""
    gen = find(conn, token, tenant=tenant, lock=lock)
    if gen is None:
        raise UnknownGeneration(token)
    return gen


def current_of(conn: Connection, stream_pks: list[int]) -> dict[int, GenerationRecord]:
    """The current generation (the newest epoch) of each of these streams that has one."""
    if not stream_pks:
        return {}
    query = _select().where(
        streams.c.id.in_(stream_pks), generations.c.epoch == streams.c.last_epoch
    )
    return {row.stream_pk: GenerationRecord.from_row(row._mapping) for row in conn.execute(query)}


def of_stream(conn: Connection, key: StreamKey) -> list[GenerationRecord]:
    """Every generation the stream still has (tombstones included), in epoch order."""
    query = (
        _select()
        .where(streams.c.tenant == key.tenant, streams.c.stream_id == key.stream_id)
        .order_by(generations.c.epoch)
    )
    return [GenerationRecord.from_row(row._mapping) for row in conn.execute(query)]


def stream(conn: Connection, key: StreamKey) -> StreamRecord | None:
    """A stream with its current generation, or None."""
    found = list_streams(conn, exact=key)
    return found[0] if found else None


def list_streams(
    conn: Connection,
    *,
    exact: StreamKey | None = None,
    prefix: str = "",
    tenant: str | None = None,
    after: StreamKey | None = None,
    limit: int | None = None,
) -> list[StreamRecord]:
    """Streams ordered by (stream_id, tenant), with their current generations."""
    query = select(streams).order_by(streams.c.stream_id, streams.c.tenant).limit(limit)
    if exact is not None:
        query = query.where(
            streams.c.tenant == exact.tenant, streams.c.stream_id == exact.stream_id
        )
    if prefix:
        query = query.where(dialect_of(conn).starts_with(streams.c.stream_id, prefix))
    if tenant is not None:
        query = query.where(streams.c.tenant == tenant)
    if after is not None:
        position = tuple_(streams.c.stream_id, streams.c.tenant)
        query = query.where(position > tuple_(after.stream_id, after.tenant))
    rows = conn.execute(query).all()
    current = current_of(conn, [row.id for row in rows])
    return [
        StreamRecord(
            stream_id=row.stream_id,
            tenant=row.tenant,
            created_at=row.created_at,
            updated_at=row.updated_at,
            generations=row.last_epoch,
            current=current.get(row.id),
        )
        for row in rows
    ]


def tenants_of(conn: Connection, stream_id: str) -> list[str]:
    """The tenants that have a stream with this id."""
    query = select(streams.c.tenant).where(streams.c.stream_id == stream_id)
    return list(conn.execute(query.order_by(streams.c.tenant)).scalars())


def totals(conn: Connection) -> Totals:
    """Streams, generations by state, and what is retained, across every tenant."""
    g = generations.c
    state = case(
        (g.expired_at.is_not(None), "expired"),
        (g.terminal, "terminal"),
        (g.superseded_at.is_not(None), "superseded"),
        (g.abandoned_at.is_not(None), "abandoned"),
        else_="live",
    )
    stream_count = conn.execute(select(func.count()).select_from(streams)).scalar()
    by_state = {
        row[0]: int(row[1]) for row in conn.execute(select(state, func.count()).group_by(state))
    }
    sums = conn.execute(
        select(
            func.coalesce(func.sum(g.retained_events), 0),
            func.coalesce(func.sum(g.retained_bytes), 0),
        )
    ).one()
    return Totals(
        streams=int(stream_count or 0),
        live=by_state.get("live", 0),
        terminal=by_state.get("terminal", 0),
        superseded=by_state.get("superseded", 0),
        expired=by_state.get("expired", 0),
        abandoned=by_state.get("abandoned", 0),
        retained_events=int(sums[0]),
        retained_bytes=int(sums[1]),
    )


def signatures(conn: Connection, stream_pks: Iterable[int]) -> dict[int, tuple[int, ...]]:
    """Per stream, numbers that change whenever any of its generations changes.

    Tails and heads only grow and every state mark only appears, so a sum or a count of
    them moves on every append, eviction, terminal mark, supersede, abandonment and
    tombstone (the
    SQLite poller narrows a change of the file down to the streams it moved).
    """
    g = generations.c
    query = (
        select(
            g.stream_pk,
            func.count(),
            func.sum(g.tail_seq),
            func.sum(g.head_seq),
            func.count(g.terminal_at),
            func.count(g.superseded_at),
            func.count(g.expired_at),
            func.count(g.abandoned_at),
        )
        .where(g.stream_pk.in_(list(stream_pks)))
        .group_by(g.stream_pk)
    )
    return {row[0]: tuple(int(v or 0) for v in row[1:]) for row in conn.execute(query)}


def open_generation(
    conn: Connection, key: StreamKey, request: NewGeneration, now: datetime
) -> GenerationRecord:
    """Create the stream if needed, supersede its current generation, open a new one."""
    conn.execute(
        dialect_of(conn)
        .insert_ignore(streams, (streams.c.tenant, streams.c.stream_id))
        .values(
            tenant=key.tenant,
            stream_id=key.stream_id,
            last_epoch=0,
            created_at=now,
            updated_at=now,
        )
    )
    # The stream row's lock serialises opens: epochs stay distinct, one is current.
    row = conn.execute(
        select(streams.c.id, streams.c.last_epoch)
        .where(streams.c.tenant == key.tenant, streams.c.stream_id == key.stream_id)
        .with_for_update()
    ).one()
    epoch = row.last_epoch + 1
    previous = _supersede(conn, row.id, row.last_epoch, now)
    token = new_token()
    conn.execute(
        insert(generations).values(
            token=token,
            stream_pk=row.id,
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
            lease_seconds=request.lease_seconds,
            lease_expires_at=now + timedelta(seconds=request.lease_seconds),
            pipeline=request.pipeline,
        )
    )
    conn.execute(
        update(streams).where(streams.c.id == row.id).values(last_epoch=epoch, updated_at=now)
    )
    touched(conn, row.id)
    opened = get(conn, token)
    remember(conn, opened)
    return opened


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


def update_generation(conn: Connection, pk: int, values: dict[str, Any]) -> None:
    """Write new values into one generation's row (its caller holds the row's lock)."""
    conn.execute(update(generations).where(generations.c.id == pk).values(**values))


def terminate(conn: Connection, token: str, now: datetime) -> GenerationRecord:
    """Make a generation terminal at its current tail (unchanged if it already is)."""
    # `UnknownGeneration` is raised before anything is written (a group's refusal).
    gen = get(conn, token, lock=True)
    if gen.terminal:
        return gen
    update_generation(
        conn, gen.pk, {"terminal": True, "terminal_seq": gen.tail_seq, "terminal_at": now}
    )
    touched(conn, gen.stream_pk)
    return get(conn, token)


def renew_lease(conn: Connection, token: str, *, tenant: str, now: datetime) -> Lease:
    """Renew a generation's writer lease to `now` + its `lease_seconds`.

    Refused (`ConflictingBatch`, before anything is written) when the generation is
    superseded, terminal, abandoned (its lease already ran out: a renewal comes too late)
    or expired, exactly as an append to it would be. A generation opened before leases
    existed keeps having none.
    """
    gen = get(conn, token, tenant=tenant, lock=True)
    refusal = writable(state_at(gen, now))
    if refusal is not None:
        raise ConflictingBatch(refusal.conflict, refusal.detail)
    if gen.lease_expires_at is None:
        return Lease(gen.token, gen.lease_seconds, None)
    expires = now + timedelta(seconds=gen.lease_seconds)
    update_generation(conn, gen.pk, {"lease_expires_at": expires})
    return Lease(gen.token, gen.lease_seconds, expires)


def state_at(gen: GenerationRecord, now: datetime) -> GenerationState:
    """What the append rules see of `gen` at `now`: a lapsed lease is abandoned already,
    whether or not the sweep has recorded it (a writer's clock, not the sweep's timing,
    decides when it was too late)."""
    return replace(gen.state(), abandoned=gen.lapsed(now))


# What makes a generation abandoned: open (neither terminal, superseded nor expired), not
# yet recorded, and its lease ran out. The one guard of every recording, so that however
# many replicas and appends notice at once, the first UPDATE records it and every other
# one matches nothing (PostgreSQL re-checks the guard on the row it waited for).
def _lapsed_guard(now: datetime) -> tuple[Any, ...]:
    g = generations.c
    return (
        g.abandoned_at.is_(None),
        g.terminal.is_(False),
        g.superseded_at.is_(None),
        g.expired_at.is_(None),
        g.lease_expires_at < now,
    )


def abandon_lapsed(
    conn: Connection, now: datetime, *, token: str | None = None, limit: int = 500
) -> list[Abandoned]:
    """Record as abandoned (at `now`) up to `limit` generations whose lease ran out (only
    `token`'s, when given): one guarded UPDATE, which wakes their streams' readers."""
    g = generations.c
    due = select(g.id).where(*_lapsed_guard(now)).limit(limit)
    if token is not None:
        due = due.where(g.token == token)
    result = conn.execute(
        update(generations)
        .where(g.id.in_(due.scalar_subquery()), *_lapsed_guard(now))
        .values(abandoned_at=now)
        .returning(g.id, g.stream_pk, g.token)
    )
    recorded = [Abandoned(row.id, row.stream_pk, row.token) for row in result]
    for gen in recorded:
        touched(conn, gen.stream_pk)
    return recorded
