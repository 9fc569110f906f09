"""The admin API (scope `admin`): every tenant's streams, explain, the audit log, actions."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from app.api.admin_schemas import (
    AdminGeneration,
    AdminStream,
    CheckOut,
    ClaimOut,
    DecisionList,
    DecisionOut,
    DeliveryOut,
    ExplainRequest,
    ExplainResponse,
    GenerationCounts,
    PurgeResponse,
    StatsResponse,
    StreamDetail,
    StreamList,
    VerdictCount,
)
from app.api.deps import AdminServiceDep, SettingsDep, get_admin
from app.api.problems import problem_responses
from app.api.schemas import MAX_SEQ, PageResponse
from app.api.writer import StreamId, Token, to_events, to_generation
from app.domain.decision import Reason, Verdict
from app.domain.ids import STREAM_ID_PATTERN
from app.service.errors import InvalidRequest
from app.storage.decisions import DecisionFilter
from app.storage.inspect import StreamKey, StreamSummary
from app.storage.records import GenerationRecord

router = APIRouter(
    prefix="/admin/v1",
    tags=["admin"],
    dependencies=[Depends(get_admin)],
    responses=problem_responses(401, 403),
)

MAX_LIST_LIMIT = 1_000

# The contract's decision table, in words, for `explain`.
CONDITIONS: dict[Reason, str] = {
    Reason.MALFORMED_ID: "the id is not <token>:<seq>",
    Reason.UNKNOWN_GENERATION: "no generation has that token (for this tenant)",
    Reason.CROSS_STREAM: "the token's stream is not the stream asked about",
    Reason.BEYOND_TAIL: "seq > the generation's tail_seq",
    Reason.SUPERSEDED: "the generation is not the stream's current one",
    Reason.TERMINAL: "the generation is terminal (terminal_resume policy)",
    Reason.EXPIRED: "the generation's events were purged (tombstone kept)",
    Reason.EVICTED: "seq < head_seq - 1 (events after the id were evicted)",
    Reason.EVICTION_HOLE: "the retained events in (seq, tail] are not contiguous",
    Reason.OK: "otherwise",
}

# NUL is in no stream id or tenant, and PostgreSQL refuses it in text: a 422, not a 500.
TENANT_PATTERN = r"^[^\x00]{1,64}$"
PREFIX_PATTERN = r"^[A-Za-z0-9._~:@=+\-]{0,256}$"

Limit = Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)]
Tenant = Annotated[str | None, Query(pattern=TENANT_PATTERN, description="Only this tenant's.")]
TenantQuery = Annotated[
    str | None,
    Query(pattern=TENANT_PATTERN, description="Needed when several tenants use the id."),
]


@router.get("/streams", responses=problem_responses(422))
async def list_streams(
    admin: AdminServiceDep,
    prefix: Annotated[str, Query(pattern=PREFIX_PATTERN)] = "",
    tenant: Tenant = None,
    limit: Limit = 100,
    cursor: str | None = None,
) -> StreamList:
    """Streams of every tenant (ordered by stream id, then tenant), with their current one."""
    rows = await admin.streams(
        prefix=prefix, tenant=tenant, after=_decode_cursor(cursor), limit=limit
    )
    return StreamList(
        streams=[_stream(row) for row in rows],
        next_cursor=_encode_cursor(rows[-1].key) if len(rows) == limit else None,
    )


@router.get("/streams/{stream_id}", responses=problem_responses(404, 409, 422))
async def get_stream(
    stream_id: StreamId, admin: AdminServiceDep, tenant: TenantQuery = None
) -> StreamDetail:
    """The stream and all its generations, tombstones included, in epoch order."""
    detail = await admin.stream(stream_id, tenant)
    return StreamDetail(
        stream_id=detail.key.stream_id,
        tenant=detail.key.tenant,
        created_at=detail.created_at,
        updated_at=detail.updated_at,
        generations=[to_admin_generation(g) for g in detail.generations],
    )


@router.delete("/streams/{stream_id}", responses=problem_responses(404, 409, 422))
async def purge_stream(
    stream_id: StreamId, admin: AdminServiceDep, tenant: TenantQuery = None
) -> PurgeResponse:
    """Purge the stream's events; its tokens stay as tombstones (resume: reset `expired`)."""
    key, tombstoned, purged = await admin.purge(stream_id, tenant)
    return PurgeResponse(
        stream_id=key.stream_id, tenant=key.tenant, tombstoned=tombstoned, purged_events=purged
    )


@router.get("/generations/{generation}", responses=problem_responses(404, 422))
async def get_generation(generation: Token, admin: AdminServiceDep) -> AdminGeneration:
    """One generation, whatever its tenant."""
    return to_admin_generation(await admin.generation(generation))


@router.get("/generations/{generation}/events", responses=problem_responses(404, 409, 410, 422))
async def page_events(
    generation: Token,
    admin: AdminServiceDep,
    settings: SettingsDep,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> PageResponse:
    """A page of the generation's events (410 rather than skip evicted ones)."""
    chosen = min(limit or settings.default_page_limit, settings.max_page_limit)
    gen, page = await admin.page(generation, after=after, limit=chosen)
    return PageResponse(
        generation=gen.token,
        events=to_events(gen, page),
        next_after=page.next_after(gen.tail_seq),
        head_seq=gen.head_seq,
        tail_seq=gen.tail_seq,
        terminal=gen.terminal,
    )


@router.post(
    "/generations/{generation}/terminate",
    status_code=status.HTTP_200_OK,
    responses=problem_responses(404, 422),
)
async def terminate_generation(generation: Token, admin: AdminServiceDep) -> AdminGeneration:
    """Force a stuck generation terminal at its current tail (a no-op when it already is)."""
    return to_admin_generation(await admin.terminate(generation))


@router.post("/explain", responses=problem_responses(415, 422))
async def explain(body: ExplainRequest, admin: AdminServiceDep) -> ExplainResponse:
    """The resume decision as a dry run: every check with its outcome; nothing recorded."""
    result = await admin.explain(body.last_event_id, stream_id=body.stream_id, tenant=body.tenant)
    decision, delivery = result.decision, result.delivery
    would_deliver = None
    if delivery is not None:
        would_deliver = DeliveryOut(
            generation=delivery.generation, after=delivery.after, events=delivery.count
        )
    return ExplainResponse(
        verdict=decision.verdict,
        reason=decision.reason,
        detail=decision.detail,
        last_event_id=body.last_event_id,
        stream_id=body.stream_id,
        claim=None
        if decision.claim is None
        else ClaimOut(token=decision.claim.token, seq=decision.claim.seq),
        generation=None if result.generation is None else to_admin_generation(result.generation),
        checks=[
            CheckOut(
                row=c.row,
                condition=CONDITIONS[c.reason],
                verdict=c.verdict,
                reason=c.reason,
                matched=c.matched,
            )
            for c in decision.checks
        ],
        would_deliver=would_deliver,
        discard_client_state=decision.verdict is Verdict.RESET,
    )


@router.get("/decisions", responses=problem_responses(422))
async def list_decisions(
    admin: AdminServiceDep,
    stream_id: Annotated[str | None, Query(pattern=STREAM_ID_PATTERN)] = None,
    verdict: Verdict | None = None,
    reason: Reason | None = None,
    tenant: Tenant = None,
    limit: Limit = 100,
) -> DecisionList:
    """The newest recorded resume decisions, newest first (a bounded audit log)."""
    where = DecisionFilter(
        stream_id=stream_id,
        verdict=None if verdict is None else verdict.value,
        reason=None if reason is None else reason.value,
        tenant=tenant,
    )
    entries = await admin.decisions(where, limit)
    return DecisionList(
        decisions=[
            DecisionOut(
                decided_at=e.decided_at,
                tenant=e.tenant,
                stream_id=e.stream_id,
                last_event_id=e.last_event_id,
                verdict=e.verdict,
                reason=e.reason,
                generation=e.generation,
                events=e.events,
            )
            for e in entries
        ]
    )


@router.get("/stats")
async def stats(admin: AdminServiceDep) -> StatsResponse:
    """Streams, generations by state, what is retained, and verdicts by reason."""
    result = await admin.stats()
    t = result.totals
    return StatsResponse(
        streams=t.streams,
        generations=GenerationCounts(
            live=t.live, terminal=t.terminal, superseded=t.superseded, expired=t.expired
        ),
        retained_events=t.retained_events,
        retained_bytes=t.retained_bytes,
        verdicts=[
            VerdictCount(verdict=verdict, reason=reason, count=count)
            for (verdict, reason), count in sorted(result.verdicts.items())
        ],
    )


def to_admin_generation(g: GenerationRecord) -> AdminGeneration:
    """The operator's view of a generation: the writer's view plus retention and times."""
    return AdminGeneration(
        **to_generation(g).model_dump(),
        tenant=g.tenant,
        retained_events=g.retained_events,
        retained_bytes=g.retained_bytes,
        last_append_at=g.last_append_at,
        expires_at=g.expires_at,
        terminal_at=g.terminal_at,
        superseded_at=g.superseded_at,
        expired_at=g.expired_at,
    )


def _stream(row: StreamSummary) -> AdminStream:
    return AdminStream(
        stream_id=row.key.stream_id,
        tenant=row.key.tenant,
        created_at=row.created_at,
        updated_at=row.updated_at,
        generations=row.generations,
        current=None if row.current is None else to_admin_generation(row.current),
    )


def _encode_cursor(key: StreamKey) -> str:
    raw = json.dumps([key.stream_id, key.tenant], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> StreamKey | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stream_id, tenant = json.loads(raw)
        if isinstance(stream_id, str) and isinstance(tenant, str):
            return StreamKey(tenant, stream_id)
    except (binascii.Error, ValueError, TypeError):
        pass
    raise InvalidRequest("validation_error", "cursor is not one this service returned")
