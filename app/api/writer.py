"""The writer API: what MCP servers call to store and resume their streams."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from app.api.deps import PrincipalDep, ServiceDep, SettingsDep
from app.api.problems import problem_responses
from app.api.schemas import (
    MAX_SEQ,
    AppendRequest,
    AppendResponse,
    EventOut,
    Generation,
    OpenGenerationRequest,
    PageResponse,
    ResumeRequest,
    ResumeResponse,
    StreamResponse,
)
from app.domain.append import EventBody
from app.domain.decision import Verdict
from app.domain.ids import STREAM_ID_PATTERN, format_event_id
from app.service.errors import InvalidRequest
from app.service.eventlog import ResumeAnswer
from app.settings import Settings
from app.storage.records import EventPage, GenerationRecord, StreamRecord

# Every writer route answers 401 without a valid key and 403 without the writer scope
# (once keys are configured), so every one documents both.
router = APIRouter(prefix="/v1", tags=["writer"], responses=problem_responses(401, 403))

StreamId = Annotated[
    str,
    Path(
        pattern=STREAM_ID_PATTERN,
        min_length=1,
        max_length=256,
        description="1-256 chars of `A-Z a-z 0-9 . _ ~ : @ = + -`, chosen by the writer.",
    ),
]
Token = Annotated[str, Path(max_length=64, description="A generation token.")]


@router.post(
    "/streams/{stream_id}/generations",
    status_code=status.HTTP_201_CREATED,
    responses=problem_responses(413, 415, 422),
)
async def open_generation(
    stream_id: StreamId,
    principal: PrincipalDep,
    service: ServiceDep,
    body: OpenGenerationRequest | None = None,
) -> Generation:
    """Open a new generation; it becomes current and the previous one is fenced."""
    options = body or OpenGenerationRequest()
    record = await service.open_generation(
        principal.tenant,
        stream_id,
        reason=options.reason,
        producer=options.producer,
        max_events=options.max_events,
        ttl_seconds=options.ttl_seconds,
    )
    return to_generation(record)


@router.post(
    "/generations/{generation}/events",
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": AppendResponse, "description": "A verified retry: nothing stored twice"},
        **problem_responses(404, 409, 413, 415, 422),
    },
)
async def append_events(
    generation: Token,
    body: AppendRequest,
    principal: PrincipalDep,
    service: ServiceDep,
    response: Response,
) -> AppendResponse:
    """Append a batch atomically; a retry with the same `first_seq` is answered 200."""
    batch = [EventBody(data=e.data, event=e.event) for e in body.events]
    result = await service.append(
        principal.tenant, generation, batch, first_seq=body.first_seq, terminal=body.terminal
    )
    if result.duplicate:
        response.status_code = status.HTTP_200_OK
    gen = result.generation
    return AppendResponse(
        generation=gen.token,
        event_ids=[
            format_event_id(gen.token, seq)
            for seq in range(result.first_seq, result.first_seq + result.count)
        ],
        head_seq=gen.head_seq,
        tail_seq=gen.tail_seq,
        terminal=gen.terminal,
        duplicate=result.duplicate,
    )


@router.post("/streams/{stream_id}/resume", responses=problem_responses(413, 415, 422))
async def resume_stream(
    stream_id: StreamId,
    body: ResumeRequest,
    principal: PrincipalDep,
    service: ServiceDep,
    settings: SettingsDep,
) -> ResumeResponse:
    """Decide whether a client may resume this stream after `last_event_id`."""
    answer = await service.resume(
        principal.tenant,
        body.last_event_id,
        asked_stream=stream_id,
        limit=_page_limit(body.limit, settings),
    )
    return to_resume_response(answer, body.last_event_id)


@router.post("/resume", responses=problem_responses(413, 415, 422))
async def resume(
    body: ResumeRequest, principal: PrincipalDep, service: ServiceDep, settings: SettingsDep
) -> ResumeResponse:
    """The same decision, taking the stream from the generation the id names."""
    answer = await service.resume(
        principal.tenant,
        body.last_event_id,
        asked_stream=None,
        limit=_page_limit(body.limit, settings),
    )
    return to_resume_response(answer, body.last_event_id)


@router.get("/generations/{generation}/events", responses=problem_responses(404, 409, 410, 422))
async def page_events(
    generation: Token,
    principal: PrincipalDep,
    service: ServiceDep,
    settings: SettingsDep,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> PageResponse:
    """Events after `after`, in order; 410 when some of them were evicted (never skipped)."""
    gen, page = await service.page(
        principal.tenant, generation, after=after, limit=_page_limit(limit, settings)
    )
    return PageResponse(
        generation=gen.token,
        events=to_events(gen, page),
        next_after=page.next_after(gen.tail_seq),
        head_seq=gen.head_seq,
        tail_seq=gen.tail_seq,
        terminal=gen.terminal,
    )


@router.get("/streams/{stream_id}", responses=problem_responses(404, 422))
async def get_stream(
    stream_id: StreamId, principal: PrincipalDep, service: ServiceDep
) -> StreamResponse:
    """The stream and its current generation."""
    return to_stream(await service.stream(principal.tenant, stream_id))


def _page_limit(limit: int | None, settings: Settings) -> int:
    if limit is None:
        return settings.default_page_limit
    if limit > settings.max_page_limit:
        raise InvalidRequest(
            "validation_error", f"limit is over the maximum ({settings.max_page_limit})"
        )
    return limit


def to_generation(record: GenerationRecord) -> Generation:
    """The API view of a generation."""
    return Generation(
        stream_id=record.stream_id,
        generation=record.token,
        epoch=record.epoch,
        reason=record.reason,
        producer=record.producer,
        head_seq=record.head_seq,
        tail_seq=record.tail_seq,
        terminal=record.terminal,
        terminal_seq=record.terminal_seq,
        max_events=record.max_events,
        ttl_seconds=record.ttl_seconds,
        superseded=not record.current,
        expired=record.expired,
        created_at=record.created_at,
        supersedes=record.supersedes,
    )


def to_stream(record: StreamRecord) -> StreamResponse:
    """The API view of a stream."""
    return StreamResponse(
        stream_id=record.stream_id,
        created_at=record.created_at,
        updated_at=record.updated_at,
        generations=record.generations,
        current=None if record.current is None else to_generation(record.current),
    )


def to_events(gen: GenerationRecord, page: EventPage) -> list[EventOut]:
    """The API view of a page of events."""
    return [
        EventOut(
            id=format_event_id(gen.token, e.seq),
            seq=e.seq,
            event=e.event,
            data=e.data,
            terminal=gen.terminal_seq == e.seq,
        )
        for e in page.events
    ]


def to_resume_response(answer: ResumeAnswer, last_event_id: str) -> ResumeResponse:
    """The API view of a resume decision."""
    decision, gen = answer.decision, answer.generation
    return ResumeResponse(
        verdict=decision.verdict,
        reason=decision.reason,
        detail=decision.detail,
        stream_id=answer.stream_id,
        last_event_id=last_event_id,
        generation=None if gen is None else gen.token,
        discard_client_state=decision.verdict is Verdict.RESET,
        events=[] if gen is None or answer.page is None else to_events(gen, answer.page),
        next_after=answer.next_after,
        terminal=False if gen is None else gen.terminal,
        head_seq=None if gen is None else gen.head_seq,
        tail_seq=None if gen is None else gen.tail_seq,
    )
