"""Request and response bodies of the HTTP API (the OpenAPI document is built from these)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal, get_type_hints

from mcp_eventlog_client import models as client
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo

from app.domain.decision import Reason, Verdict
from app.domain.ids import MAX_SEQ, format_event_id
from app.service.eventlog import MAX_LEASE_SECONDS, MAX_PIPELINE, MIN_LEASE_SECONDS
from app.service.reading import Reading
from app.storage.records import AppendResult, EventPage, GenerationRecord
from app.text import check_label, check_utf8

GenerationReason = Literal["initial", "failover", "retry", "reset"]


def plain_text(value: str) -> str:
    """`value` itself when it holds no NUL and is valid UTF-8; else `ValueError` (a 422)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL")
    return check_utf8(value)


def _sse_field(value: str) -> str:
    # An SSE field and a label operators read: no control (CR, LF, ESC…) or bidi character.
    return check_label(value)


EventData = Annotated[str, AfterValidator(plain_text)]
EventType = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_sse_field)]
Producer = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_sse_field)]


class _Request(BaseModel):
    # Strict: "47" is not 47 and 1.0 is not a seq; unknown fields are typos, not extensions.
    model_config = ConfigDict(strict=True, extra="forbid")


class OpenGenerationRequest(_Request):
    """Options for a new generation; all optional."""

    reason: GenerationReason | None = Field(
        default=None, description="Why it is opened; default `initial` for epoch 1, else `reset`."
    )
    producer: Producer | None = Field(default=None, description="Who writes it (free text).")
    max_events: int | None = Field(
        default=None, ge=1, description="Events retained; older ones are evicted."
    )
    ttl_seconds: int | None = Field(
        default=None, ge=1, description="Seconds after its last write before it expires."
    )
    lease_seconds: int | None = Field(
        default=None,
        ge=MIN_LEASE_SECONDS,
        le=MAX_LEASE_SECONDS,
        description="The writer's lease: renewed by every append and lease call; run out, "
        "the generation is abandoned. Default EVENTLOG_WRITER_LEASE_SECONDS (30).",
    )
    pipeline: int = Field(
        default=0,
        ge=0,
        le=MAX_PIPELINE,
        description="How many events past its acknowledged tail the writer may show a client "
        "(a resume claim that far past the tail is `lost_tail`, not `beyond_tail`).",
    )


class EventIn(_Request):
    """One event to append: its SSE `data` and optional SSE `event` type."""

    data: EventData
    event: EventType | None = None


class AppendRequest(_Request):
    """An atomic batch of events; see the contract for `first_seq` and `terminal`."""

    events: list[EventIn]
    first_seq: int | None = Field(default=None, ge=1, le=MAX_SEQ)
    terminal: bool = False

    @model_validator(mode="after")
    def _events_or_terminal(self) -> AppendRequest:
        if not self.events and not self.terminal:
            raise ValueError("events may be empty only when terminal is true")
        return self


FrameId = str | int | float | bool | None


class AppendFrame(AppendRequest):
    """A frame of the append channel (`GET /v1/append`): the Append body, the generation
    it goes to and an id the answer echoes (any JSON scalar)."""

    id: FrameId
    generation: Annotated[str, Field(max_length=64)]


MAX_LEASE_FRAME_GENERATIONS = 1_000
"""The most generations one lease frame of the channel renews."""


class LeaseFrame(_Request):
    """A lease frame of the append channel: renew `generation`'s lease, or each of
    `generations`' (exactly one of the two), as `POST /v1/generations/{g}/lease` would."""

    id: FrameId
    lease: Literal[True]
    generation: Annotated[str, Field(max_length=64)] | None = None
    generations: (
        Annotated[
            list[Annotated[str, Field(max_length=64)]],
            Field(min_length=1, max_length=MAX_LEASE_FRAME_GENERATIONS),
        ]
        | None
    ) = None

    @model_validator(mode="after")
    def _one_or_many(self) -> LeaseFrame:
        if (self.generation is None) == (self.generations is None):
            raise ValueError("a lease frame names `generation` or `generations`, not both")
        return self


class ResumeRequest(_Request):
    """A client's claim to resume after `last_event_id`."""

    last_event_id: str = Field(description="The client's `Last-Event-ID`, exactly as sent.")
    limit: int | None = Field(
        default=None, ge=1, description="Events returned at most (default 500)."
    )


class RecordView(BaseModel):
    # Responses are built from the storage layer's records by attribute (`model_validate`),
    # so a field list is written once: here.
    model_config = ConfigDict(from_attributes=True, validate_by_name=True)


def client_record_model(record: type[Any], /, **changes: Any) -> type[BaseModel]:
    """A model of the fields of `record`, a dataclass of the Python client (the package of
    the service's own version it depends on): one field list for both ends of the contract,
    in the client's order, with its types and defaults. `changes` gives a field the
    service's own type (a type, such as its enum or its own model) or its own default and
    description (a `Field(...)`, with the client's type).

    Subclass it to name the response model and give it its docstring (the OpenAPI
    document's title and description). mypy cannot follow a base class built at import,
    so to mypy the subclass's fields are untyped.
    """
    hints = get_type_hints(record)
    definitions: dict[str, Any] = {}
    for field in dataclasses.fields(record):
        kind = hints[field.name]
        default = ... if field.default is dataclasses.MISSING else field.default
        if field.name in changes:
            change = changes.pop(field.name)
            kind, default = (kind, change) if isinstance(change, FieldInfo) else (change, default)
        definitions[field.name] = (kind, default)
    if changes:
        raise TypeError(f"{record.__name__} has no field {', '.join(changes)}")
    return create_model(record.__name__, **definitions)


class Generation(RecordView):
    """A generation of a stream: its place (epoch), its events' range and its state."""

    stream_id: str
    generation: str = Field(validation_alias="token", description="The generation token.")
    epoch: int
    reason: str
    producer: str | None
    head_seq: int
    tail_seq: int
    terminal: bool
    terminal_seq: int | None
    max_events: int
    ttl_seconds: int
    superseded: bool
    expired: bool
    abandoned: bool
    abandoned_at: datetime | None = Field(
        description="When the writer's lease was found run out (null while not abandoned)."
    )
    lease_seconds: int
    lease_expires_at: datetime | None = Field(
        description="When the writer's lease runs out unless renewed (null: opened before "
        "leases existed, never abandoned)."
    )
    pipeline: int
    created_at: datetime
    supersedes: str | None


class LeaseResponse(RecordView):
    """A generation's writer lease, as a renewal left it."""

    generation: str = Field(validation_alias="token", description="The generation token.")
    lease_seconds: int
    lease_expires_at: datetime | None


def event_ids(result: AppendResult) -> list[str]:
    """The ids of an accepted (or duplicate) batch, in order."""
    gen = result.generation
    return [
        format_event_id(gen.token, seq)
        for seq in range(result.first_seq, result.first_seq + result.count)
    ]


class AppendResponse(client_record_model(client.AppendResult)):  # type: ignore[misc]
    """The ids of the appended (or recognised duplicate) events and the generation's range."""

    @classmethod
    def of(cls, result: AppendResult) -> AppendResponse:
        """The ids of an accepted (or duplicate) batch and its generation's range after it."""
        gen = result.generation
        return cls(
            generation=gen.token,
            event_ids=event_ids(result),
            head_seq=gen.head_seq,
            tail_seq=gen.tail_seq,
            terminal=gen.terminal,
            duplicate=result.duplicate,
        )


class EventOut(client_record_model(client.StoredEvent)):  # type: ignore[misc]
    """One stored event."""

    @classmethod
    def page_of(cls, gen: GenerationRecord, page: EventPage | None) -> list[EventOut]:
        """The events of a page of `gen`, with their SSE ids."""
        if page is None:
            return []
        return [
            cls(
                id=format_event_id(gen.token, e.seq),
                seq=e.seq,
                event=e.event,
                data=e.data,
                terminal=gen.terminal_seq == e.seq,
            )
            for e in page.events
        ]


class ResumeResponse(
    client_record_model(  # type: ignore[misc]
        client.ResumeAnswer, verdict=Verdict, reason=Reason, events=list[EventOut]
    )
):
    """The verdict on a resume claim and, where it delivers any, events to send."""

    @classmethod
    def of(cls, reading: Reading, last_event_id: str) -> ResumeResponse:
        """The answer to a resume claim."""
        decision, gen = reading.decision, reading.delivered
        return cls(
            verdict=decision.verdict,
            reason=decision.reason,
            detail=decision.detail,
            stream_id=reading.stream_id,
            last_event_id=last_event_id,
            generation=None if gen is None else gen.token,
            discard_client_state=decision.verdict is Verdict.RESET,
            events=[] if gen is None else EventOut.page_of(gen, reading.page),
            next_after=reading.next_after,
            terminal=False if gen is None else gen.terminal,
            head_seq=None if gen is None else gen.head_seq,
            tail_seq=None if gen is None else gen.tail_seq,
        )


class PageResponse(
    client_record_model(  # type: ignore[misc]
        client.EventPage,
        events=list[EventOut],
        superseded=Field(description="A newer generation fenced this one: no more events."),
    )
):
    """A page of a generation's events; `next_after` is set while more remain."""

    abandoned: bool = Field(
        description="The writer's lease ran out: no more events (recorded by the sweep)."
    )

    @classmethod
    def of(cls, gen: GenerationRecord, page: EventPage) -> PageResponse:
        """A page of `gen`'s events."""
        return cls(
            generation=gen.token,
            events=EventOut.page_of(gen, page),
            next_after=page.next_after(gen.tail_seq),
            head_seq=gen.head_seq,
            tail_seq=gen.tail_seq,
            terminal=gen.terminal,
            superseded=gen.superseded,
            abandoned=gen.abandoned,
        )


class StreamResponse(RecordView):
    """A stream and its current generation."""

    stream_id: str
    created_at: datetime
    updated_at: datetime
    generations: int
    current: Generation | None


class Health(BaseModel):
    """Liveness."""

    status: Literal["ok"]


class Problem(BaseModel):
    """An RFC 9457 problem; `code` is stable and what programs should match on."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    code: str
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None
