"""What the writer API answers, as typed, immutable values.

The client reads the service's JSON into these frozen dataclasses; they carry only what the
contract promises (unknown fields a newer service adds are ignored). `read_answer` is the
one way in: a field missing or of the wrong type is a `MalformedResponse`, never a
`KeyError` or a `TypeError` out of the client.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, fields
from datetime import datetime
from enum import Enum
from types import UnionType
from typing import (
    Any,
    ClassVar,
    Literal,
    Self,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

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


Reader = Callable[[Any, str], Any]
"""Reads one value (a member's, or an item of an array member) named `name` for errors."""


def checked(value: Any, name: str, kind: type) -> Any:
    """`value` of the member `name` when it is a `kind` (a JSON boolean is no integer);
    else `TypeError`."""
    return _instance_of(kind)(value, name)


@functools.cache
def _instance_of(kind: type) -> Reader:
    """The reader of a value that must be a `kind` (one per kind, as it is on every path)."""

    def read(value: Any, name: str) -> Any:
        if type(value) is kind or (
            isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        ):
            return value
        raise TypeError(f"{name!r} is {type(value).__name__}")

    return read


def flag(body: Mapping[str, Any], name: str) -> bool:
    """A boolean member that a service from before it was added leaves out: false then."""
    value = body.get(name)
    return value is not None and bool(checked(value, name, bool))


def _reader(kind: Any) -> Reader:
    """How a value of the declared type `kind` is read from JSON (nothing here is lenient:
    a field read leniently is given to `read_record` by its record)."""
    origin, args = get_origin(kind), get_args(kind)
    text, array, obj = _instance_of(str), _instance_of(list), _instance_of(dict)
    if kind is datetime:
        return lambda value, name: datetime.fromisoformat(text(value, name))
    if origin is Literal:
        return lambda value, name: _one_of(args, text(value, name), name)
    if origin is tuple:  # tuple[X, ...]: a JSON array of X
        item = _reader(args[0])
        return lambda value, name: tuple(item(v, name) for v in array(value, name))
    if isinstance(kind, type) and issubclass(kind, Enum):
        return lambda value, name: kind(text(value, name))
    if isinstance(kind, type) and issubclass(kind, Record):
        return lambda value, name: kind.from_json(obj(value, name))
    return _instance_of(origin or kind)


def _one_of(allowed: tuple[str, ...], value: str, name: str) -> str:
    if value not in allowed:
        raise ValueError(f"{name!r} is {value!r}")
    return value


Member = tuple[str, Reader, Any]
"""A record's field: its name (its member's), how its value is read, and what stands for
a member left out or null (`MISSING`: the member is required)."""


def _member(name: str, kind: Any, default: Any) -> Member:
    """A field of the declared type `kind`: required, unless its type admits None or it has
    a default."""
    args = get_args(kind)
    if get_origin(kind) in (Union, UnionType) and type(None) in args:
        (kind,) = (arg for arg in args if arg is not type(None))
        default = None
    return name, _reader(kind), default


_MEMBERS: dict[type[Record], tuple[Member, ...]] = {}


def _members(record: type[Record]) -> tuple[Member, ...]:
    """The fields of `record` as read, in order (worked out once per record)."""
    members = _MEMBERS.get(record)
    if members is None:
        hints = get_type_hints(record)
        members = tuple(_member(f.name, hints[f.name], f.default) for f in fields(record))
        _MEMBERS[record] = members
    return members


R = TypeVar("R", bound="Record")


def read_record(record: type[R], body: Mapping[str, Any], **given: Any) -> R:
    """A `record` from a JSON object of the contract: each field read from the member of
    its name by its declared type (`str`, `int`, `bool`, `dict`, `datetime`, a `Literal`
    or an enum of strings, another record, a `tuple[X, ...]` from an array, each `| None`
    or with a default when the member may be left out); `given` holds the fields a record
    reads otherwise (from another member, or leniently)."""
    values: dict[str, Any] = {}
    for name, read, default in _members(record):
        if given and name in given:
            values[name] = given[name]
        elif default is MISSING:
            values[name] = read(body[name], name)
        elif (value := body.get(name)) is None:
            values[name] = default
        else:
            values[name] = read(value, name)
    return record(**values)


class Record:
    """A record of the contract (each a frozen dataclass): read from the service's JSON by
    its fields' declared types (`read_record`)."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Self:
        """Read the record from a JSON object of the contract."""
        return read_record(cls, body)


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One event to append: its SSE `data` and optional SSE `event` type."""

    data: str
    event: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The request body form of the event."""
        return {"data": self.data, "event": self.event}


@dataclass(frozen=True, slots=True)
class Generation(Record):
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
    def from_json(cls, body: Mapping[str, Any]) -> Generation:
        """Read a Generation object of the contract (its token is the member `generation`)."""
        return read_record(
            cls,
            body,
            token=checked(body["generation"], "generation", str),
            superseded=flag(body, "superseded"),
            expired=flag(body, "expired"),
        )


@dataclass(frozen=True, slots=True)
class Lease(Record):
    """A renewed writer lease: the generation and when its lease now runs out (None when
    the service did not say)."""

    generation: str
    lease_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class AppendResult(Record):
    """The ids of an appended batch (or of the stored batch it duplicates)."""

    generation: str
    event_ids: tuple[str, ...]
    head_seq: int
    tail_seq: int
    terminal: bool
    duplicate: bool


@dataclass(frozen=True, slots=True)
class StoredEvent(Record):
    """One stored event, with its id `<token>:<seq>`."""

    id: str
    seq: int
    event: str | None
    data: str
    terminal: bool


@dataclass(frozen=True, slots=True)
class ResumeAnswer(Record):
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


@dataclass(frozen=True, slots=True)
class EventPage(Record):
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


@dataclass(frozen=True, slots=True)
class StreamView(Record):
    """A stream and its current generation."""

    stream_id: str
    created_at: datetime
    updated_at: datetime
    generations: int
    current: Generation | None
