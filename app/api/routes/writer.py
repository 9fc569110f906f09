"""The writer API: what MCP servers call to store and resume their streams."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from app.api.auth import Principal
from app.api.deps import (
    AdmissionDep,
    LiveDep,
    PrincipalDep,
    ServiceDep,
    SettingsDep,
    page_limit,
    page_wait,
)
from app.api.problems import problem_responses
from app.api.routes.appends import append_responses, appended_status, event_bodies
from app.api.routes.live import page_or_wait, served_page
from app.api.routes.params import After, PageSize, StreamId, Token, Wait
from app.api.schemas import (
    AppendRequest,
    AppendResponse,
    Generation,
    LeaseResponse,
    OpenGenerationRequest,
    PageResponse,
    ResumeRequest,
    ResumeResponse,
    StreamResponse,
)
from app.service.eventlog import EventLogService
from app.settings import Settings
from app.storage.records import EventPage, GenerationRecord

# Every writer route answers 401 without a valid key and 403 without the writer scope
# (once keys are configured), so every one documents both.
router = APIRouter(prefix="/v1", tags=["writer"], responses=problem_responses(401, 403))


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
        lease_seconds=options.lease_seconds,
        pipeline=options.pipeline,
    )
    return Generation.model_validate(record)


@router.post("/generations/{generation}/lease", responses=problem_responses(404, 409, 422))
async def renew_lease(
    generation: Token, principal: PrincipalDep, service: ServiceDep
) -> LeaseResponse:
    """Renew the writer's lease (a writer with nothing to append); refused 409 when the
    generation is superseded, terminal, abandoned (too late: the lease ran out) or expired."""
    lease = await service.leases.renew(principal.tenant, generation)
    return LeaseResponse.model_validate(lease)


@router.post(
    "/generations/{generation}/events",
    status_code=status.HTTP_201_CREATED,
    responses=append_responses(AppendResponse),
)
async def append_events(
    generation: Token,
    body: AppendRequest,
    principal: PrincipalDep,
    service: ServiceDep,
    response: Response,
) -> AppendResponse:
    """Append a batch atomically; a retry with the same `first_seq` is answered 200."""
    batch = event_bodies(body.events)
    result = await service.append(
        principal.tenant, generation, batch, first_seq=body.first_seq, terminal=body.terminal
    )
    response.status_code = appended_status(result)
    return AppendResponse.of(result)


@router.post("/streams/{stream_id}/resume", responses=problem_responses(413, 415, 422))
async def resume_stream(
    stream_id: StreamId,
    body: ResumeRequest,
    principal: PrincipalDep,
    service: ServiceDep,
    settings: SettingsDep,
) -> ResumeResponse:
    """Decide whether a client may resume this stream after `last_event_id`."""
    return await _resume(body, principal, service, settings, asked_stream=stream_id)


@router.post("/resume", responses=problem_responses(413, 415, 422))
async def resume(
    body: ResumeRequest, principal: PrincipalDep, service: ServiceDep, settings: SettingsDep
) -> ResumeResponse:
    """The same decision, taking the stream from the generation the id names."""
    return await _resume(body, principal, service, settings, asked_stream=None)


async def _resume(
    body: ResumeRequest,
    principal: Principal,
    service: EventLogService,
    settings: Settings,
    *,
    asked_stream: str | None,
) -> ResumeResponse:
    reading = await service.resume(
        principal.tenant,
        body.last_event_id,
        asked_stream=asked_stream,
        limit=page_limit(body.limit, settings),
    )
    return ResumeResponse.of(reading, body.last_event_id)


@router.get(
    "/generations/{generation}/events",
    response_model=PageResponse,
    responses=problem_responses(404, 409, 410, 422, 503),
)
async def page_events(
    request: Request,
    generation: Token,
    principal: PrincipalDep,
    service: ServiceDep,
    live: LiveDep,
    admission: AdmissionDep,
    settings: SettingsDep,
    after: After = 0,
    limit: PageSize = None,
    wait: Wait = None,
) -> Response:
    """Events after `after`, in order; 410 when some of them were evicted (never skipped).

    With `wait`, when nothing after `after` exists yet and the generation can still grow,
    the answer waits up to `wait` seconds for an append, terminal, supersede or expiry.
    At most `EVENTLOG_MAX_PAGES_IN_FLIGHT` pages are served at once (503 `too_many_pages`).
    """
    size = page_limit(limit, settings)
    wait = page_wait(wait, settings)

    async def read() -> tuple[GenerationRecord, EventPage]:
        return await page_or_wait(
            request, service, live, principal.tenant, generation, after=after, limit=size, wait=wait
        )

    return await served_page(admission, read, PageResponse.of)


@router.get("/streams/{stream_id}", responses=problem_responses(404, 422))
async def get_stream(
    stream_id: StreamId, principal: PrincipalDep, service: ServiceDep
) -> StreamResponse:
    """The stream and its current generation."""
    return StreamResponse.model_validate(await service.stream(principal.tenant, stream_id))
