"""Bodies of the admin API (kept beside the writer's `schemas.py`, one module per audience)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas import Generation, RecordView
from app.domain.decision import Reason, Verdict
from app.domain.ids import STREAM_ID_MAX_LENGTH, STREAM_ID_PATTERN


class AdminGeneration(Generation):
    """A generation as an operator sees it: the writer's view plus retention and timestamps."""

    tenant: str
    retained_events: int
    retained_bytes: int
    expired: bool = Field(description="Its events were purged; the token is a tombstone.")
    last_append_at: datetime
    expires_at: datetime
    terminal_at: datetime | None
    superseded_at: datetime | None
    expired_at: datetime | None


class AdminStream(RecordView):
    """A stream in the listing, with its current generation."""

    stream_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    generations: int = Field(description="Generations ever opened (the newest epoch).")
    current: AdminGeneration | None


class StreamList(BaseModel):
    """A page of streams; pass `next_cursor` as `cursor` for the next one."""

    streams: list[AdminStream]
    next_cursor: str | None


class StreamDetail(RecordView):
    """A stream and every generation it still has (tombstones included), in epoch order."""

    stream_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    generations: list[AdminGeneration]


class PurgeResponse(RecordView):
    """What a purge did: generations made tombstones and events deleted."""

    stream_id: str
    tenant: str
    tombstoned: int
    purged_events: int


class ExplainRequest(BaseModel):
    """A claim to decide as a dry run; `tenant` looks the token up as that tenant would."""

    model_config = ConfigDict(strict=True, extra="forbid")

    last_event_id: str
    stream_id: str | None = Field(
        default=None, pattern=STREAM_ID_PATTERN, max_length=STREAM_ID_MAX_LENGTH
    )
    tenant: str | None = Field(default=None, pattern=r"^[^\x00]{1,64}$")


class CheckOut(RecordView):
    """One row of the decision table as it was evaluated."""

    row: str = Field(description='The row of the contract\'s table: "1" … "10", "4a", "4b".')
    condition: str
    verdict: Verdict
    reason: Reason
    matched: bool


class ClaimOut(RecordView):
    """The parsed `Last-Event-ID`."""

    token: str
    seq: int


class DeliveryOut(BaseModel):
    """What the resume would deliver: `events` events of `generation` after `after`."""

    generation: str
    after: int
    events: int


class ExplainResponse(BaseModel):
    """The verdict, every check up to the match, and what a resume would have delivered."""

    verdict: Verdict
    reason: Reason
    detail: str
    last_event_id: str
    stream_id: str | None
    claim: ClaimOut | None
    generation: AdminGeneration | None
    checks: list[CheckOut]
    would_deliver: DeliveryOut | None
    discard_client_state: bool


class DecisionOut(RecordView):
    """One recorded resume decision."""

    decided_at: datetime
    tenant: str
    stream_id: str | None
    last_event_id: str
    verdict: str
    reason: str
    generation: str | None = Field(description="The generation whose events were delivered.")
    events: int


class DecisionList(BaseModel):
    """Recent decisions, newest first."""

    decisions: list[DecisionOut]


class GenerationCounts(RecordView):
    """Generations by state; each is in exactly one (expired, else terminal, else ...)."""

    live: int
    terminal: int
    superseded: int
    abandoned: int = Field(description="Open, neither terminal nor superseded: lease ran out.")
    expired: int


class VerdictCount(BaseModel):
    """How many recorded decisions had this verdict and reason."""

    verdict: str
    reason: str
    count: int


class StatsResponse(BaseModel):
    """Counts across the whole log; verdicts cover the audit log's window."""

    streams: int
    generations: GenerationCounts
    retained_events: int
    retained_bytes: int
    verdicts: list[VerdictCount]
