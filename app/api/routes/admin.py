"""The admin API (scope `admin`): every tenant's streams, explain, the audit log, actions."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from app.api.deps import AdminServiceDep, SettingsDep, get_admin, page_limit
from app.api.problems import problem_responses
from app.api.routes.admin_schemas import (
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
from app.api.routes.params import After, PageSize, QueryInt, StreamId, Token
from app.api.schemas import PageResponse
from app.domain.decision import Reason, ScopeReason, Verdict
from app.domain.ids import STREAM_ID_MAX_LENGTH, STREAM_ID_PATTERN, StreamKey
from app.errors import InvalidRequest

router = APIRouter(
    prefix="/admin/v1",
    tags=["admin"],
    dependencies=[Depends(get_admin)],
    responses=problem_responses(401, 403),
)

MAX_LIST_LIMIT = 1_000

# NUL is in no stream id or tenant, and PostgreSQL refuses it in text: a 422, not a 500.
TENANT_PATTERN = r"^[^\x00]{1,64}$"
PREFIX_PATTERN = r"^[A-Za-z0-9._~:@=+\-]{0,256}$"

ListLimit = Annotated[QueryInt, Query(ge=1, le=MAX_LIST_LIMIT)]
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
    limit: ListLimit = 100,
    cursor: str | None = None,
) -> StreamList:
    """Streams of every tenant (ordered by stream id, then tenant), with their current one."""
    rows = await admin.streams(
        prefix=prefix, tenant=tenant, after=_decode_cursor(cursor), limit=limit
    )
    last = rows[-1] if len(rows) == limit else None
    return StreamList(
        streams=[AdminStream.model_validate(row) for row in rows],
        next_cursor=None
        if last is None
        else _encode_cursor(StreamKey(last.tenant, last.stream_id)),
    )


@router.get("/streams/{stream_id}", responses=problem_responses(404, 409, 422))
async def get_stream(
    stream_id: StreamId, admin: AdminServiceDep, tenant: TenantQuery = None
) -> StreamDetail:
    """The stream and all its generations, tombstones included, in epoch order."""
    return StreamDetail.model_validate(await admin.stream(stream_id, tenant))


@router.delete("/streams/{stream_id}", responses=problem_responses(404, 409, 422))
async def purge_stream(
    stream_id: StreamId, admin: AdminServiceDep, tenant: TenantQuery = None
) -> PurgeResponse:
    """Purge the stream's events; its tokens stay as tombstones (resume: reset `expired`)."""
    return PurgeResponse.model_validate(await admin.purge(stream_id, tenant))


@router.get("/generations/{generation}", responses=problem_responses(404, 422))
async def get_generation(generation: Token, admin: AdminServiceDep) -> AdminGeneration:
    """One generation, whatever its tenant."""
    return AdminGeneration.model_validate(await admin.generation(generation))


@router.get("/generations/{generation}/events", responses=problem_responses(404, 409, 410, 422))
async def page_events(
    generation: Token,
    admin: AdminServiceDep,
    settings: SettingsDep,
    after: After = 0,
    limit: PageSize = None,
) -> PageResponse:
    """A page of the generation's events (410 rather than skip evicted ones)."""
    gen, page = await admin.page(generation, after=after, limit=page_limit(limit, settings))
    return PageResponse.of(gen, page)


@router.post(
    "/generations/{generation}/terminate",
    status_code=status.HTTP_200_OK,
    responses=problem_responses(404, 422),
)
async def terminate_generation(generation: Token, admin: AdminServiceDep) -> AdminGeneration:
    """Force a stuck generation terminal at its current tail (a no-op when it already is)."""
    return AdminGeneration.model_validate(await admin.terminate(generation))


@router.post("/explain", responses=problem_responses(415, 422))
async def explain(
    body: ExplainRequest, admin: AdminServiceDep, settings: SettingsDep
) -> ExplainResponse:
    """The resume decision as a dry run: every check with its outcome; nothing recorded."""
    result = await admin.explain(
        body.last_event_id,
        stream_id=body.stream_id,
        tenant=body.tenant,
        limit=settings.default_page_limit,
    )
    reading = result.reading
    decision, delivered, claimed = reading.decision, reading.delivered, reading.claimed
    return ExplainResponse(
        verdict=decision.verdict,
        reason=decision.reason,
        detail=decision.detail,
        last_event_id=body.last_event_id,
        stream_id=body.stream_id,
        claim=None if decision.claim is None else ClaimOut.model_validate(decision.claim),
        generation=None if claimed is None else AdminGeneration.model_validate(claimed),
        checks=[CheckOut.model_validate(check) for check in decision.checks],
        would_deliver=None
        if delivered is None
        else DeliveryOut(
            generation=delivered.token, after=result.after, events=result.would_deliver
        ),
        discard_client_state=decision.verdict is Verdict.RESET,
    )


@router.get("/decisions", responses=problem_responses(422))
async def list_decisions(
    admin: AdminServiceDep,
    stream_id: Annotated[
        str | None, Query(pattern=STREAM_ID_PATTERN, max_length=STREAM_ID_MAX_LENGTH)
    ] = None,
    verdict: Verdict | None = None,
    reason: Reason | ScopeReason | None = None,
    tenant: Tenant = None,
    limit: ListLimit = 100,
) -> DecisionList:
    """The newest recorded resume decisions, newest first (a bounded audit log)."""
    entries = await admin.decisions(
        stream_id=stream_id, verdict=verdict, reason=reason, tenant=tenant, limit=limit
    )
    return DecisionList(decisions=[DecisionOut.model_validate(e) for e in entries])


@router.get("/stats")
async def stats(admin: AdminServiceDep) -> StatsResponse:
    """Streams, generations by state, what is retained, and verdicts by reason."""
    result = await admin.stats()
    totals = result.totals
    return StatsResponse(
        streams=totals.streams,
        generations=GenerationCounts.model_validate(totals),
        retained_events=totals.retained_events,
        retained_bytes=totals.retained_bytes,
        verdicts=[
            VerdictCount(verdict=verdict, reason=reason, count=count)
            for (verdict, reason), count in sorted(result.verdicts.items())
        ],
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
    raise InvalidRequest("cursor is not one this service returned")
