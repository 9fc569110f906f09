"""What the writer API answers, as typed, immutable values.

The client reads the service's JSON into these frozen dataclasses; they carry only what the
contract promises (unknown fields a newer service adds are ignored). `read_answer` is the
one way in: a field missing or of the wrong type is a `MalformedResponse`, never a
`KeyError` or a `TypeError` out of the client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from mcp_eventlog_client.errors import MalformedResponse
from mcp_eventlog_client.verdict import Verdict

T = TypeVar("T")


def read_answer(reader: Callable[[dict[str, Any]], T], body: Any) -> T:
    """`reader(body)` for a JSON object of the contract; `MalformedResponse` for anything else."""
    try:
        if not isinstance(body, dict):
            raise TypeError(f"a JSON object was expected, not {type(body).__name__}")
        return reader(body)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        detail = f"the answer does not fit the contract: {type(error).__name__}: {error}"
        raise MalformedResponse(200, MalformedResponse.code, detail) from error


def _of(body: dict[str, Any], name: str, *kinds: type) -> Any:
    value = body.get(name) if type(None) in kinds else body[name]
    if not isinstance(value, kinds):
        raise TypeError(f"{name!r} is {type(value).__name__}")
    return value


def _str(body: dict[str, Any], name: str) -> str:
    value: str = _of(body, name, str)
    return value


def _int(body: dict[str, Any], name: str) -> int:
    value: int = _of(body, name, int)
    return value


def _bool(body: dict[str, Any], name: str) -> bool:
    value: bool = _of(body, name, bool)
    return value


def _opt_str(body: dict[str, Any], name: str) -> str | None:
    value: str | None = _of(body, name, str, type(None))
    return value


def _opt_int(body: dict[str, Any], name: str) -> int | None:
    value: int | None = _of(body, name, int, type(None))
    return value


def _time(body: dict[str, Any], name: str) -> datetime:
    return datetime.fromisoformat(_str(body, name))


def _opt_time(body: dict[str, Any], name: str) -> datetime | None:
    value = _opt_str(body, name)
    return None if value is None else datetime.fromisoformat(value)


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
    lease_seconds: int | None = None
    """The writer lease: a generation neither terminal nor superseded whose lease runs out
    (no append and no renewal for this long) is abandoned. None from a service without
    leases."""
    lease_expires_at: datetime | None = None
    pipeline: int = 0
    """How many events the writer may show before the service acknowledged them."""
    abandoned_at: datetime | None = None

    @property
    def abandoned(self) -> bool:
        """Whether the service recorded the generation abandoned (its writer's lease ran out)."""
        return self.abandoned_at is not None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Generation:
        """Read a Generation object of the contract."""
        return cls(
            stream_id=_str(body, "stream_id"),
            token=_str(body, "generation"),
            epoch=_int(body, "epoch"),
            reason=_str(body, "reason"),
            producer=_opt_str(body, "producer"),
            head_seq=_int(body, "head_seq"),
            tail_seq=_int(body, "tail_seq"),
            terminal=_bool(body, "terminal"),
            terminal_seq=_opt_int(body, "terminal_seq"),
            superseded=bool(_of(body, "superseded", bool, type(None))),
            expired=bool(_of(body, "expired", bool, type(None))),
            created_at=_time(body, "created_at"),
            supersedes=_opt_str(body, "supersedes"),
            lease_seconds=_opt_int(body, "lease_seconds"),
            lease_expires_at=_opt_time(body, "lease_expires_at"),
            pipeline=_opt_int(body, "pipeline") or 0,
            abandoned_at=_opt_time(body, "abandoned_at"),
        )


@dataclass(frozen=True, slots=True)
class Lease:
    """A renewed writer lease: the generation and when its lease now runs out (None when
    the service did not say)."""

    generation: str
    lease_expires_at: datetime | None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Lease:
        """Read the answer to a lease renewal (REST or a channel frame)."""
        return cls(
            generation=_str(body, "generation"),
            lease_expires_at=_opt_time(body, "lease_expires_at"),
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
            generation=_str(body, "generation"),
            event_ids=tuple(_str({"id": i}, "id") for i in _of(body, "event_ids", list)),
            head_seq=_int(body, "head_seq"),
            tail_seq=_int(body, "tail_seq"),
            terminal=_bool(body, "terminal"),
            duplicate=_bool(body, "duplicate"),
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
            id=_str(body, "id"),
            seq=_int(body, "seq"),
            event=_opt_str(body, "event"),
            data=_str(body, "data"),
            terminal=_bool(body, "terminal"),
        )


def _events(body: dict[str, Any]) -> tuple[StoredEvent, ...]:
    return tuple(StoredEvent.from_json(e) for e in _of(body, "events", list))


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
            verdict=Verdict(_str(body, "verdict")),
            reason=_str(body, "reason"),
            detail=_str(body, "detail"),
            stream_id=_opt_str(body, "stream_id"),
            last_event_id=_str(body, "last_event_id"),
            generation=_opt_str(body, "generation"),
            discard_client_state=_bool(body, "discard_client_state"),
            events=_events(body),
            next_after=_opt_int(body, "next_after"),
            terminal=_bool(body, "terminal"),
            head_seq=_opt_int(body, "head_seq"),
            tail_seq=_opt_int(body, "tail_seq"),
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
            generation=_str(body, "generation"),
            events=_events(body),
            next_after=_opt_int(body, "next_after"),
            head_seq=_int(body, "head_seq"),
            tail_seq=_int(body, "tail_seq"),
            terminal=_bool(body, "terminal"),
            superseded=bool(_of(body, "superseded", bool, type(None))),
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
        current = _of(body, "current", dict, type(None))
        return cls(
            stream_id=_str(body, "stream_id"),
            created_at=_time(body, "created_at"),
            updated_at=_time(body, "updated_at"),
            generations=_int(body, "generations"),
            current=None if current is None else Generation.from_json(current),
        )
