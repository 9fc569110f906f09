"""What a write transaction changed: the streams it touched, and what it appended to them.

Every write that changes a stream (open, append, terminate, tombstone) marks it with
`touched(conn, stream_pk)` inside its transaction. The transaction runner takes the set
with `take_touched` before COMMIT — to announce it to other processes where the database
has a way (PostgreSQL's `pg_notify`, which reaches every listening replica if, and only
if, the transaction commits) — and after COMMIT gives it to this process's
`LocalCommits` (`app/storage/wakeups.py`). A change only says "read again": the tables
stay the only source of truth, so a lost or late wake-up can delay an event, never lose
or reorder it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Connection

from app.storage.records import EventRecord, GenerationRecord

_TOUCHED = "eventlog.touched"


@dataclass(frozen=True, slots=True)
class TailAppend:
    """Events a transaction appended at the tail of one generation, and that generation
    as the transaction left it: this process's readers get them without reading them back."""

    generation: GenerationRecord
    events: tuple[EventRecord, ...]

    @property
    def after(self) -> int:
        """The seq just before the first of the events."""
        return self.events[0].seq - 1


Changes = dict[int, TailAppend | None]
"""The streams a transaction changed; for each, what it appended when that is all it did."""


def touched(conn: Connection, stream_pk: int, appended: TailAppend | None = None) -> None:
    """Note that the running transaction changed the stream `stream_pk` (by `appended`,
    when that is the change: two appends in a row to one generation still are)."""
    changes: Changes = conn.info.setdefault(_TOUCHED, {})
    if stream_pk not in changes:
        changes[stream_pk] = appended
        return
    before = changes[stream_pk]
    follows = (
        before is not None
        and appended is not None
        and before.generation.token == appended.generation.token
        and before.events[-1].seq == appended.after
    )
    changes[stream_pk] = (
        TailAppend(appended.generation, before.events + appended.events)
        if follows and before is not None and appended is not None
        else None
    )


def take_touched(conn: Connection) -> Changes:
    """The streams the running transaction changed (and forget them: the next one starts clean)."""
    changes: Changes = conn.info.pop(_TOUCHED, {})
    return changes
