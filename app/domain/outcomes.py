"""What the use cases report as they run, for observers (audit log, metrics, warning log).

Small immutable facts in the problem's words; an observer needs nothing else, so it never
depends on the service that reports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.decision import Reason, ScopeReason, Verdict


@dataclass(frozen=True, slots=True)
class Decided:
    """A resume claim was decided, and `delivered` events of `generation` go with it."""

    tenant: str
    stream_id: str | None
    last_event_id: str
    verdict: Verdict
    reason: Reason | ScopeReason
    generation: str | None
    delivered: int


@dataclass(frozen=True, slots=True)
class BatchAcknowledged:
    """A batch was stored (`count` events, evicting `evicted`), or was a verified retry."""

    count: int
    duplicate: bool
    evicted: int


@dataclass(frozen=True, slots=True)
class RetentionPass:
    """What one retention pass did; `ran` is False when another replica held the lock."""

    ran: bool
    expired: int = 0
    capped: int = 0
    purged_events: int = 0
    deleted_tombstones: int = 0
    deleted_streams: int = 0
    trimmed_decisions: int = 0
