"""What the writer API answers, as typed, immutable values.

The client reads the service's JSON into these frozen dataclasses; they carry only what the
contract promises (unknown fields a newer service adds are ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcp_eventlog_client.verdict import Verdict


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One event to append: its SSE `data` and optional SSE `event` type."""

    data: str
    event: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The request body form of the event."""
        return {"data": self.data, "event": self.event}


@dataclass(frozen=True, slots=True)
class Generation:
    """A generation of a stream: its token, its place (epoch), its range and its state."""

    stream_id: str
    token: str
    epoch: int
    reason: str
    producer: str | None
    head_seq: int
    tail_seq: int
    terminal: bool
    terminal_seq: int | None
    superseded: bool
    expired: bool
    created_at: datetime
    supersedes: str | None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Generation:
        """Read a Generation object of the contract."""
        return cls(
            stream_id=body["stream_id"],
            token=body["generation"],
            epoch=body["epoch"],
            reason=body["reason"],
            producer=body.get("producer"),
            head_seq=body["head_seq"],
            tail_seq=body["tail_seq"],
            terminal=body["terminal"],
            terminal_seq=body.get("terminal_seq"),
            superseded=body.get("superseded", False),
            expired=body.get("expired", False),
            created_at=datetime.fromisoformat(body["created_at"]),
            supersedes=body.get("supersedes"),
        )


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The ids of an appended batch (or of the stored batch it duplicates)."""

    generation: str
    event_ids: tuple[str, ...]
    head_seq: int
    tail_seq: int
    terminal: bool
    duplicate: bool

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> AppendResult:
        """Read an append response."""
        return cls(
            generation=body["generation"],
            event_ids=tuple(body["event_ids"]),
            head_seq=body["head_seq"],
            tail_seq=body["tail_seq"],
            terminal=body["terminal"],
            duplicate=body["duplicate"],
        )


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One stored event, with its id `<token>:<seq>`."""

    id: str
    seq: int
    event: str | None
    data: str
    terminal: bool

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> StoredEvent:
        """Read one event of a page or a resume answer."""
        return cls(
            id=body["id"],
            seq=body["seq"],
            event=body.get("event"),
            data=body["data"],
            terminal=body["terminal"],
        )


def _events(body: dict[str, Any]) -> tuple[StoredEvent, ...]:
    return tuple(StoredEvent.from_json(e) for e in body["events"])


@dataclass(frozen=True, slots=True)
class ResumeAnswer:
    """The verdict on a `Last-Event-ID` and, when it delivers any, the first page of events.

    `next_after` is set while more events remain: page on with
    `EventLogClient.page(generation, after=next_after)`.
    """

    verdict: Verdict
    reason: str
    detail: str
    stream_id: str | None
    last_event_id: str
    generation: str | None
    discard_client_state: bool
    events: tuple[StoredEvent, ...]
    next_after: int | None
    terminal: bool
    head_seq: int | None
    tail_seq: int | None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ResumeAnswer:
        """Read a resume response."""
        return cls(
            verdict=Verdict(body["verdict"]),
            reason=body["reason"],
            detail=body["detail"],
            stream_id=body.get("stream_id"),
            last_event_id=body["last_event_id"],
            generation=body.get("generation"),
            discard_client_state=body["discard_client_state"],
            events=_events(body),
            next_after=body.get("next_after"),
            terminal=body["terminal"],
            head_seq=body.get("head_seq"),
            tail_seq=body.get("tail_seq"),
        )


@dataclass(frozen=True, slots=True)
class EventPage:
    """A page of a generation's events; `next_after` is set while more remain.

    `superseded`: a newer generation fenced this one, so no event will follow the page.
    """

    generation: str
    events: tuple[StoredEvent, ...]
    next_after: int | None
    head_seq: int
    tail_seq: int
    terminal: bool
    superseded: bool = False

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> EventPage:
        """Read a page response."""
        return cls(
            generation=body["generation"],
            events=_events(body),
            next_after=body.get("next_after"),
            head_seq=body["head_seq"],
            tail_seq=body["tail_seq"],
            terminal=body["terminal"],
            superseded=body.get("superseded", False),
        )


@dataclass(frozen=True, slots=True)
class StreamView:
    """A stream and its current generation."""

    stream_id: str
    created_at: datetime
    updated_at: datetime
    generations: int
    current: Generation | None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> StreamView:
        """Read a stream response."""
        current = body.get("current")
        return cls(
            stream_id=body["stream_id"],
            created_at=datetime.fromisoformat(body["created_at"]),
            updated_at=datetime.fromisoformat(body["updated_at"]),
            generations=body["generations"],
            current=None if current is None else Generation.from_json(current),
        )
