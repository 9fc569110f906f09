"""The task API (scope `writer`): the task record of MCP's tasks extension, in the log.

Requesters create, get, answer and cancel (bound to the task's `principal`); the worker
moves the status, renews its lease, appends progress events and takes over (fenced by its
`attempt`). A task's events are read as pages, long-polls and SSE like any stream's.
"""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response, status

from app.api.deps import (
    AdmissionDep,
    LiveDep,
    PrincipalDep,
    ServiceDep,
    SettingsDep,
    api_state,
    page_limit,
    page_wait,
)
from app.api.problems import problem_responses
from app.api.routes.appends import append_responses, appended_status, event_bodies
from app.api.routes.live import Claim, claimed_id, followed, page_or_wait, served_page
from app.api.routes.params import After, PageSize, Wait
from app.api.routes.task_schemas import (
    AttemptRequest,
    CancelRequest,
    CreateTaskRequest,
    InputRequest,
    InputResponse,
    LeaseRequest,
    StatusRequest,
    TaskAppendResponse,
    TaskEventsPage,
    TaskEventsRequest,
    TaskOut,
)
from app.domain.ids import TOKEN_PATTERN
from app.domain.tasks import task_stream_id
from app.service.tasks import TaskService
from app.storage.records import EventPage, GenerationRecord

router = APIRouter(prefix="/v1", tags=["tasks"], responses=problem_responses(401, 403))


async def get_tasks(request: Request) -> TaskService:
    """The task use cases."""
    return api_state(request).container.tasks


TasksDep = Annotated[TaskService, Depends(get_tasks)]
# An id of another form was never issued; within the form, any id the caller may not see is
# the one 404 `unknown_task`.
TaskId = Annotated[str, Path(pattern=TOKEN_PATTERN, max_length=64, description="A task id.")]
PrincipalQuery = Annotated[
    str | None,
    Query(
        alias="principal",
        min_length=1,
        max_length=256,
        pattern=r"^[^\x00]*$",
        description="The requester's identity, as given at creation.",
    ),
]


@router.post(
    "/tasks", status_code=status.HTTP_201_CREATED, responses=problem_responses(413, 415, 422)
)
async def create_task(
    caller: PrincipalDep, tasks: TasksDep, body: CreateTaskRequest | None = None
) -> TaskOut:
    """Create a `working` task (attempt 1); answered once it is durably stored."""
    options = body or CreateTaskRequest()
    task = await tasks.create(
        caller.tenant,
        principal=options.principal,
        ttl_ms=options.ttl_ms,
        poll_interval_ms=options.poll_interval_ms,
        request=options.request,
        lease_seconds=options.lease_seconds,
        producer=options.producer,
    )
    return TaskOut.of(task)


@router.get("/tasks/{task_id}", responses=problem_responses(404, 422))
async def get_task(
    task_id: TaskId, caller: PrincipalDep, tasks: TasksDep, principal: PrincipalQuery = None
) -> TaskOut:
    """The task, for its requester: unknown, expired and another's are one 404."""
    return TaskOut.of(await tasks.get(caller.tenant, task_id, principal))


@router.post("/tasks/{task_id}/status", responses=problem_responses(404, 409, 413, 415, 422))
async def change_status(
    task_id: TaskId, body: StatusRequest, caller: PrincipalDep, tasks: TasksDep
) -> TaskOut:
    """The worker moves the task (fenced by `attempt`; terminal is final)."""
    task = await tasks.transition(
        caller.tenant,
        task_id,
        attempt=body.attempt,
        status=body.status,
        status_message=body.status_message,
        result=body.result,
        error=body.error,
        input_requests=body.input_requests,
    )
    return TaskOut.of(task)


@router.post("/tasks/{task_id}/lease", responses=problem_responses(404, 409, 413, 415, 422))
async def renew_lease(
    task_id: TaskId, body: LeaseRequest, caller: PrincipalDep, tasks: TasksDep
) -> TaskOut:
    """The worker renews its lease (fenced by `attempt`)."""
    task = await tasks.renew(
        caller.tenant, task_id, attempt=body.attempt, status_message=body.status_message
    )
    return TaskOut.of(task)


@router.post(
    "/tasks/{task_id}/attempts",
    status_code=status.HTTP_201_CREATED,
    responses=problem_responses(404, 409, 413, 415, 422),
)
async def take_over(
    task_id: TaskId, body: AttemptRequest, caller: PrincipalDep, tasks: TasksDep
) -> TaskOut:
    """A new attempt, fencing the holder of `supersedes` (its writes and its appends)."""
    task = await tasks.new_attempt(
        caller.tenant,
        task_id,
        supersedes=body.supersedes,
        lease_seconds=body.lease_seconds,
        producer=body.producer,
    )
    return TaskOut.of(task)


@router.post(
    "/tasks/{task_id}/events",
    status_code=status.HTTP_201_CREATED,
    responses=append_responses(TaskAppendResponse),
)
async def append_events(
    task_id: TaskId,
    body: TaskEventsRequest,
    caller: PrincipalDep,
    tasks: TasksDep,
    response: Response,
) -> TaskAppendResponse:
    """Progress events of the worker's attempt; renews its lease."""
    batch = event_bodies(body.events)
    task, result = await tasks.append(
        caller.tenant, task_id, attempt=body.attempt, batch=batch, first_seq=body.first_seq
    )
    response.status_code = appended_status(result)
    return TaskAppendResponse.of(task, result)


@router.post("/tasks/{task_id}/input", responses=problem_responses(404, 409, 413, 415, 422))
async def answer_input(
    task_id: TaskId, body: InputRequest, caller: PrincipalDep, tasks: TasksDep
) -> InputResponse:
    """The requester's answers, by key (unknown or already answered keys are ignored)."""
    answered = await tasks.answer_input(
        caller.tenant, task_id, body.principal, body.input_responses
    )
    out = TaskOut.of(answered.task)
    return InputResponse(**out.model_dump(), accepted=answered.accepted)


@router.post("/tasks/{task_id}/cancel", responses=problem_responses(404, 413, 415, 422))
async def cancel_task(
    task_id: TaskId, caller: PrincipalDep, tasks: TasksDep, body: CancelRequest | None = None
) -> TaskOut:
    """Cancel the task (idempotent; a terminal task stays as it is)."""
    who = (body or CancelRequest()).principal
    return TaskOut.of(await tasks.cancel(caller.tenant, task_id, who))


@router.get(
    "/tasks/{task_id}/events",
    response_model=TaskEventsPage,
    responses=problem_responses(404, 409, 410, 422, 503),
)
async def page_events(
    request: Request,
    task_id: TaskId,
    caller: PrincipalDep,
    tasks: TasksDep,
    service: ServiceDep,
    live: LiveDep,
    admission: AdmissionDep,
    settings: SettingsDep,
    principal: PrincipalQuery = None,
    after: After = 0,
    limit: PageSize = None,
    wait: Wait = None,
) -> Response:
    """The current attempt's events after `after`; 410 `evicted` (with `earliest_seq`)
    when some of them are no longer retained. With `wait`, a long-poll."""
    size = page_limit(limit, settings)
    wait = page_wait(wait, settings)
    tenant = caller.tenant
    task, token = await tasks.events_of(tenant, task_id, principal)

    async def read() -> tuple[GenerationRecord, EventPage]:
        async with tasks.gone_as_evicted(tenant, token):
            return await page_or_wait(
                request, service, live, tenant, token, after=after, limit=size, wait=wait
            )

    return await served_page(admission, read, functools.partial(TaskEventsPage.of_task, task))


@router.get(
    "/tasks/{task_id}/live",
    response_class=Response,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "The task's events, as SSE"},
        **problem_responses(400, 404, 406, 409, 422, 503),
    },
)
async def follow_task(
    request: Request,
    task_id: TaskId,
    caller: PrincipalDep,
    tasks: TasksDep,
    live: LiveDep,
    settings: SettingsDep,
    principal: PrincipalQuery = None,
    last_event_id: Claim = None,
    last_event_id_header: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """Follow the task's events (`task:<task_id>`) from `Last-Event-ID`, with the Resume
    table's verdicts: a new attempt is a `reset`, a settled task ends with `end`."""
    claim = claimed_id(request, accept, last_event_id_header, last_event_id)
    await tasks.get(caller.tenant, task_id, principal)
    stream_id = task_stream_id(task_id)
    return await followed(live, caller.tenant, stream_id, claim, settings.live_retry_ms)
