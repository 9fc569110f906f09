"""Appending at the tail: a batch as the rows it is stored as, and the common append.

The common append — events at the tail of a live generation, nothing to evict — is one
`UPDATE … RETURNING` that checks every rule the contract has for it in its WHERE clause
and moves the tail, then one INSERT (`two_statements`). Everything else (retries,
refusals, eviction, an empty batch, a generation this process has not seen yet) matches
nothing or is not tried, and takes the full path in `app/storage/events.py`, which reads
the row first and applies the domain's rules. The statements are built once:
SQLAlchemy's per-statement construction and cache key were most of an append's CPU
(bench/results/append-path.md, section 4b).

`two_statements` is the default of the dialect hook `Dialect.append_at_tail`, which a
database with a better way to run the same append overrides (PostgreSQL: one CTE that
wraps the same `UPDATE`; SQLite: the same two statements on the driver's cursor);
`tests/storage/test_tail.py` holds each way to the full path's answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, insert, or_, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql.dml import ReturningUpdate

from app.domain.append import EventBody
from app.storage import schema
from app.storage.records import EventRecord

EVENT_COLUMNS = ("generation_pk", "seq", "event", "data", "nbytes")
"""The columns of an `events` row, in the order `Batch.values` gives them."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch of events and the size of each one's data in bytes (encoded once)."""

    bodies: Sequence[EventBody]
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, bodies: Sequence[EventBody]) -> Batch:
        """The batch of `bodies`, sized."""
        return cls(bodies, tuple(len(body.data.encode()) for body in bodies))

    @property
    def nbytes(self) -> int:
        """The bytes of data the whole batch stores."""
        return sum(self.sizes)

    def rows(self, generation_pk: int, first_seq: int) -> list[dict[str, Any]]:
        """The batch as `events` rows of one generation, from `first_seq` on."""
        values = self.values(generation_pk, first_seq)
        return [dict(zip(EVENT_COLUMNS, row, strict=True)) for row in values]

    def values(self, generation_pk: int, first_seq: int) -> list[tuple[Any, ...]]:
        """The same rows as tuples, in `EVENT_COLUMNS` order (for a driver's own INSERT)."""
        pairs = zip(self.bodies, self.sizes, strict=True)
        return [
            (generation_pk, seq, body.event, body.data, size)
            for seq, (body, size) in enumerate(pairs, start=first_seq)
        ]

    def records(self, first_seq: int) -> tuple[EventRecord, ...]:
        """The batch as the events a reader gets, from `first_seq` on."""
        return tuple(
            EventRecord(seq, body.event, body.data)
            for seq, body in enumerate(self.bodies, start=first_seq)
        )


@dataclass(frozen=True, slots=True)
class AtTail:
    """An append tried at the tail of a generation this process has seen, as one guarded
    write: it happens only if every rule of the contract lets it (else nothing is written)."""

    generation_pk: int
    token: str
    batch: Batch
    first_seq: int | None
    """The seq the writer says the batch starts at (None: wherever the tail is)."""
    terminal: bool
    now: datetime
    expires_at: datetime
    """The generation's new expiry (its TTL from `now`)."""
    lease_expires_at: datetime
    """Its writer's lease, renewed by the append (its `lease_seconds` from `now`)."""

    def params(self) -> dict[str, Any]:
        """The bind parameters of the guarded `UPDATE` (`b_…`: not a column's name)."""
        return {
            "b_pk": self.generation_pk,
            "b_token": self.token,
            "b_n": len(self.batch.bodies),
            "b_nbytes": self.batch.nbytes,
            "b_now": self.now,
            "b_expires_at": self.expires_at,
            "b_lease_expires_at": self.lease_expires_at,
            "b_prev": None if self.first_seq is None else self.first_seq - 1,
        }


_INSERT = insert(schema.events)
_g = schema.generations
_APPENDABLE = (
    _g.c.id == bindparam("b_pk"),
    _g.c.token == bindparam("b_token"),
    _g.c.superseded_at.is_(None),
    _g.c.expired_at.is_(None),
    _g.c.terminal.is_(False),
    _g.c.tail_seq + bindparam("b_n") - _g.c.head_seq < _g.c.max_events,
    # Not abandoned, recorded or not: a lease that ran out before this append is the
    # full path's refusal (`abandoned`), never renewed by it.
    _g.c.abandoned_at.is_(None),
    or_(_g.c.lease_expires_at.is_(None), _g.c.lease_expires_at >= bindparam("b_now")),
)
_TAIL_VALUES = {
    "tail_seq": _g.c.tail_seq + bindparam("b_n"),
    "retained_events": _g.c.retained_events + bindparam("b_n"),
    "retained_bytes": _g.c.retained_bytes + bindparam("b_nbytes"),
    "last_append_at": bindparam("b_now"),
    "expires_at": bindparam("b_expires_at"),
    # Renewed in the same statement; a generation opened before leases existed has none.
    "lease_expires_at": case(
        (_g.c.lease_expires_at.is_(None), None),
        else_=bindparam("b_lease_expires_at", type_=schema.UtcDateTime()),
    ),
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


def tail_update(at: AtTail) -> ReturningUpdate[Any]:
    """The guarded `UPDATE … RETURNING` that moves the tail for `at` (built once), for a
    database whose own statement wraps it (PostgreSQL's one-statement append)."""
    return tail_update_for(at.first_seq is not None, at.terminal)


def tail_update_for(checked_seq: bool, terminal: bool) -> ReturningUpdate[Any]:
    """The guarded `UPDATE … RETURNING` for an append that names its first seq or not, and
    finishes the generation or not (for a database that compiles all four ahead: SQLite)."""
    return _TAIL_UPDATES[(checked_seq, terminal)]


def insert_events(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Store events rows (one statement, built once)."""
    conn.execute(_INSERT, rows[0] if len(rows) == 1 else rows)


def two_statements(conn: Connection, at: AtTail) -> RowMapping | None:
    """The guarded `UPDATE … RETURNING` that moves the tail, then the INSERT of the rows:
    the generation's row as it left it, or None (nothing written) when the rules say no."""
    row = conn.execute(tail_update(at), at.params()).one_or_none()
    if row is None:
        return None
    moved = row._mapping
    first_seq = moved["tail_seq"] - len(at.batch.bodies) + 1
    insert_events(conn, at.batch.rows(at.generation_pk, first_seq))
    return moved
