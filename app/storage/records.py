"""What the store returns: plain, immutable records (no rows or sessions leak out).

Their field names are the ones the API shows, so response models are built from them
(`from_attributes`) instead of copying field lists by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

from app.domain.append import GenerationState
from app.domain.decision import GenerationFacts

View = TypeVar("View", GenerationState, GenerationFacts)


@dataclass(frozen=True, slots=True)
class GenerationRecord:
    """One generation of a stream, as stored."""

    pk: int
    token: str
    stream_pk: int
    stream_id: str
    tenant: str
    epoch: int
    reason: str
    producer: str | None
    head_seq: int
    tail_seq: int
    retained_events: int
    retained_bytes: int
    terminal: bool
    terminal_seq: int | None
    max_events: int
    ttl_seconds: int
    supersedes: str | None
    created_at: datetime
    last_append_at: datetime
    expires_at: datetime
    terminal_at: datetime | None
    superseded_at: datetime | None
    expired_at: datetime | None
    lease_seconds: int = 30
    lease_expires_at: datetime | None = None
    pipeline: int = 0
    abandoned_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> GenerationRecord:
        """A `generations` row joined with its stream's `stream_id` and `tenant`."""
        return cls(**{f.name: row["id" if f.name == "pk" else f.name] for f in _GENERATION_FIELDS})

    @property
    def current(self) -> bool:
        """Whether this is its stream's current generation (not superseded)."""
        return self.superseded_at is None

    @property
    def superseded(self) -> bool:
        """Whether a newer generation of its stream fenced this one."""
        return self.superseded_at is not None

    @property
    def expired(self) -> bool:
        """Whether the TTL purged its events (only the tombstone is left)."""
        return self.expired_at is not None

    @property
    def abandoned(self) -> bool:
        """Whether its writer's lease ran out and that was recorded (it is fenced)."""
        return self.abandoned_at is not None

    def lapsed(self, now: datetime) -> bool:
        """Whether it is abandoned as of `now`: recorded so, or its lease ran out while it
        was neither terminal, superseded nor expired (the sweep has not recorded it yet).
        A generation without a lease (opened before leases existed) never lapses."""
        if self.abandoned:
            return True
        lease = self.lease_expires_at
        open_ = not self.terminal and self.current and not self.expired
        return open_ and lease is not None and lease < now

    @property
    def contiguous(self) -> bool:
        """Whether the retained events are exactly the run head..tail (no hole)."""
        return self.retained_events == self.tail_seq - self.head_seq + 1

    @property
    def fully_retained(self) -> bool:
        """Whether every event from seq 1 is still there: a client can start over with it."""
        return self.head_seq == 1 and not self.expired and self.contiguous

    def state(self) -> GenerationState:
        """What the append rules look at (`app/domain/append.py`)."""
        return _as(GenerationState, self)

    def facts(self) -> GenerationFacts:
        """What the resume decision looks at (`app/domain/decision.py`)."""
        return _as(GenerationFacts, self)


_GENERATION_FIELDS = fields(GenerationRecord)


def _as(view: type[View], gen: GenerationRecord) -> View:
    """`gen` as one of the domain's views of a generation: each of the view's fields is
    the record's attribute of the same name, so no field list is copied by hand."""
    return view(**{name: getattr(gen, name) for name in _VIEW_FIELDS[view]})


_VIEW_FIELDS = {view: [f.name for f in fields(view)] for view in (GenerationState, GenerationFacts)}


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One stored event."""

    seq: int
    event: str | None
    data: str


@dataclass(frozen=True, slots=True)
class EventPage:
    """Events read after a seq: `through` is the last seq the page covers."""

    after: int
    through: int
    events: tuple[EventRecord, ...]

    @property
    def contiguous(self) -> bool:
        """Whether every seq in (after, through] is present, in order.

        The events are read in ascending seq order within (after, through], each seq once,
        so counting them is enough (a live crowd asks this of one page once per reader).
        """
        return len(self.events) == self.through - self.after

    def next_after(self, tail_seq: int) -> int | None:
        """Where the next page starts, or None when this page reaches the tail."""
        return self.through if self.through < tail_seq else None


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The outcome of an accepted append (stored, or recognised as a duplicate)."""

    generation: GenerationRecord
    first_seq: int
    count: int
    duplicate: bool
    evicted: int = 0  # events this append evicted past the generation's max_events


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """A stream and its current generation (`generations`: how many it has opened)."""

    stream_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    generations: int
    current: GenerationRecord | None


@dataclass(frozen=True, slots=True)
class Totals:
    """Counts across the whole log (each generation is in exactly one state)."""

    streams: int
    live: int
    terminal: int
    superseded: int
    expired: int
    retained_events: int
    retained_bytes: int
    abandoned: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """A generation's writer lease as a renewal left it."""

    token: str
    lease_seconds: int
    lease_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class Abandoned:
    """A generation the lease sweep (or an append that met its lapsed lease) just recorded
    as abandoned."""

    pk: int
    stream_pk: int
    token: str


@dataclass(frozen=True, slots=True)
class Tombstoned:
    """A generation just marked expired: its pk and the tail its events end at."""

    pk: int
    tail_seq: int


@dataclass(frozen=True, slots=True)
class DecisionEntry:
    """One resume decision as the audit log keeps it (never any event data)."""

    decided_at: datetime
    tenant: str
    stream_id: str | None
    last_event_id: str
    verdict: str
    reason: str
    generation: str | None
    events: int
