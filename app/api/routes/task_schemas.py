"""Request and response bodies of the task API (`app/api/routes/tasks.py`, docs/tasks.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from mcp_eventlog_client.task_records import Task, TaskAppend
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.api.schemas import (
    EventIn,
    PageResponse,
    Producer,
    client_record_model,
    event_ids,
    plain_text,
)
from app.domain.ids import MAX_SEQ
from app.domain.tasks import TaskStatus
from app.storage.records import AppendResult, EventPage, GenerationRecord
from app.storage.tasks import TaskRecord

MAX_LEASE_SECONDS = 86_400


Principal = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(plain_text)]
StatusMessage = Annotated[str, Field(max_length=4_096), AfterValidator(plain_text)]
Attempt = Annotated[int, Field(ge=1, le=2**31 - 1)]
LeaseSeconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS)]


class _Request(BaseModel):
    # Strict, as every request body of the service: unknown fields are typos.
    model_config = ConfigDict(strict=True, extra="forbid")


class CreateTaskRequest(_Request):
    """A new task; every field optional."""

    principal: Principal | None = Field(
        default=None, description="Who may read it (the requester's identity); null: nobody else."
    )
    ttl_ms: int | None = Field(default=None, ge=1, description="Kept at least this long.")
    poll_interval_ms: int | None = Field(default=None, ge=0, le=86_400_000)
    request: dict[str, Any] | None = Field(default=None, description="What was asked (kept).")
    lease_seconds: LeaseSeconds | None = Field(
        default=None, description="The worker lease (default EVENTLOG_WRITER_LEASE_SECONDS)."
    )
    producer: Producer | None = Field(default=None, description="Who works it (free text).")


class StatusRequest(_Request):
    """A worker's status change, fenced by its attempt."""

    attempt: Attempt
    status: Annotated[TaskStatus, Field(strict=False)]  # from its JSON string
    status_message: StatusMessage | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class LeaseRequest(_Request):
    """A worker renewing its lease (and optionally saying how it goes)."""

    attempt: Attempt
    status_message: StatusMessage | None = None


class AttemptRequest(_Request):
    """A worker taking the task over from the holder of attempt `supersedes`."""

    supersedes: Attempt
    lease_seconds: LeaseSeconds | None = None
    producer: Producer | None = None


class TaskEventsRequest(_Request):
    """Progress events of the worker's attempt."""

    attempt: Attempt
    events: list[EventIn] = Field(min_length=1)
    first_seq: int | None = Field(default=None, ge=1, le=MAX_SEQ)


class InputRequest(_Request):
    """The requester's answers to the task's input requests, by key."""

    principal: Principal | None = None
    input_responses: dict[str, Any]


class CancelRequest(_Request):
    """The requester cancelling the task."""

    principal: Principal | None = None


class TaskOut(
    client_record_model(  # type: ignore[misc]
        Task,
        status=TaskStatus,
        generation=Field(description="The current attempt's generation of `task:<task_id>`."),
    )
):
    """A task. `result` is there when completed, `error` when failed, `input_requests`
    (and the `input_responses` given so far) when input_required."""

    @classmethod
    def of(cls, task: TaskRecord) -> TaskOut:
        """The task as the API shows it: what belongs to its status inlined."""
        state = task.state
        waiting = state is TaskStatus.INPUT_REQUIRED
        return cls(
            task_id=task.task_id,
            status=state,
            status_message=task.status_message,
            created_at=task.created_at,
            last_updated_at=task.last_updated_at,
            ttl_ms=task.ttl_ms,
            poll_interval_ms=task.poll_interval_ms,
            attempt=task.attempt,
            generation=task.generation,
            lease_expires_at=task.lease_expires_at,
            cancel_requested=task.cancel_requested_at is not None,
            result=task.result if state is TaskStatus.COMPLETED else None,
            error=task.error if state is TaskStatus.FAILED else None,
            input_requests=task.input_requests if waiting else None,
            input_responses=(task.input_responses or {}) if waiting else None,
        )


class InputResponse(TaskOut):
    """The task after the answers, and which keys were taken (the others were ignored)."""

    accepted: list[str]


class TaskEventsPage(PageResponse):
    """A page of the current attempt's events; a reader that sees `attempt` change (or
    `superseded`) discards what it has and starts over from `after=0`."""

    task_id: str
    attempt: int

    @classmethod
    def of_task(cls, task: TaskRecord, gen: GenerationRecord, page: EventPage) -> TaskEventsPage:
        """A page of the events of `gen`, the attempt's generation of `task`."""
        base = PageResponse.of(gen, page)
        return cls(**base.model_dump(), task_id=task.task_id, attempt=gen.epoch)


class TaskAppendResponse(client_record_model(TaskAppend)):  # type: ignore[misc]
    """The ids of the appended events, and the worker's lease after the append."""

    @classmethod
    def of(cls, task: TaskRecord, result: AppendResult) -> TaskAppendResponse:
        """The ids of the batch `result` accepted (or recognised) for `task`'s attempt."""
        return cls(
            task_id=task.task_id,
            attempt=task.attempt,
            generation=result.generation.token,
            event_ids=event_ids(result),
            tail_seq=result.generation.tail_seq,
            duplicate=result.duplicate,
            lease_expires_at=task.lease_expires_at,
        )


class AdminTask(TaskOut):
    """A task as an operator sees it: its tenant, principal and what was asked, too."""

    tenant: str
    principal: str | None
    request: dict[str, Any] | None
    expires_at: datetime
    lease_seconds: int
    settled_at: datetime | None

    @classmethod
    def of_record(cls, task: TaskRecord) -> AdminTask:
        """The operator's view of a stored task: the task as its requester sees it, and the
        operator's own fields read from the record by their names."""
        shown = TaskOut.of(task).model_dump()
        stored = {name: getattr(task, name) for name in cls.model_fields if name not in shown}
        return cls(**shown, **stored)


class TaskList(BaseModel):
    """A page of tasks, newest first; pass `next_cursor` as `cursor` for the next one."""

    tasks: list[AdminTask]
    next_cursor: str | None
