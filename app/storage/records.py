"""What the store returns: plain, immutable records (no rows or sessions leak out)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


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

    @property
    def current(self) -> bool:
        """Whether this is its stream's current generation (not superseded)."""
        return self.superseded_at is None

    @property
    def expired(self) -> bool:
        """Whether the TTL purged its events (only the tombstone is left)."""
        return self.expired_at is not None

    @property
    def contiguous(self) -> bool:
        """Whether the retained events are exactly the run head..tail (no hole)."""
        return self.retained_events == self.tail_seq - self.head_seq + 1


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
        """Whether every seq in (after, through] is present, in order."""
        return [e.seq for e in self.events] == list(range(self.after + 1, self.through + 1))

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
    """A stream and its current generation."""

    stream_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    generations: int
    current: GenerationRecord | None
