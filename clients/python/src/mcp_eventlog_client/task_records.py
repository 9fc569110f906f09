"""The records of the task API (`/v1/tasks`): a task, an input answer, an append's
answer and a page of a task's events, each read from the service's JSON and checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, get_args

from mcp_eventlog_client.models import EventPage, Record, checked

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
TASK_STATUSES: frozenset[str] = frozenset(get_args(TaskStatus))


@dataclass(frozen=True, slots=True)
class Task(Record):
    """A task as the service answers it.

    `result` is set when `completed` (the tool's `CallToolResult`, a tool error included),
    `error` when `failed` (a JSON-RPC error object; `error["data"]["reason"] ==
    "worker_lost"` when its worker's lease ran out), `input_requests` and
    `input_responses` (the answers given so far in this round) when `input_required`.
    `attempt` is the fencing token of the one worker allowed to write it.
    """

    task_id: str
    status: TaskStatus
    status_message: str | None
    created_at: datetime
    last_updated_at: datetime
    ttl_ms: int
    poll_interval_ms: int
    attempt: int
    generation: str
    lease_expires_at: datetime | None
    cancel_requested: bool
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    input_responses: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        """Whether the task settled (`completed`, `failed`, `cancelled`): it never changes again."""
        return self.status in TERMINAL_STATUSES

    @property
    def worker_lost(self) -> bool:
        """Whether the task failed because its worker stopped renewing its lease."""
        data = (self.error or {}).get("data")
        return isinstance(data, dict) and data.get("reason") == "worker_lost"

    def to_mcp(self) -> dict[str, Any]:
        """The task as MCP's tasks extension shows it (SEP-2663 `DetailedTask`, camelCase):
        what `tasks/get` answers and `CreateTaskResult` carries (add its `resultType`)."""
        return mcp_detailed(self)


class ShownTask(Protocol):
    """What the tasks extension's shapes are made of: a `Task` of this client, or the
    service's stored task record (its gateway answers MCP's task calls with these shapes)."""

    @property
    def task_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def status_message(self) -> str | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def last_updated_at(self) -> datetime: ...
    @property
    def ttl_ms(self) -> int: ...
    @property
    def poll_interval_ms(self) -> int: ...
    @property
    def result(self) -> dict[str, Any] | None: ...
    @property
    def error(self) -> dict[str, Any] | None: ...
    @property
    def input_requests(self) -> dict[str, Any] | None: ...
    @property
    def input_responses(self) -> dict[str, Any] | None: ...


def mcp_time(moment: datetime) -> str:
    """A time as the extension writes it: ISO 8601 in UTC, with `Z` (naive is taken as UTC)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def mcp_task_fields(task: ShownTask) -> dict[str, Any]:
    """The extension's `Task` fields (camelCase) that every answer about a task carries."""
    fields: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": mcp_time(task.created_at),
        "lastUpdatedAt": mcp_time(task.last_updated_at),
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_interval_ms,
    }
    if task.status_message is not None:
        fields["statusMessage"] = task.status_message
    return fields


def mcp_detailed(task: ShownTask) -> dict[str, Any]:
    """The `Task` fields and what the status inlines: `result` when completed, `error` when
    failed, the input requests not answered yet when input_required (an answered key is
    not asked again). A `DetailedTask` without its `resultType`."""
    shown = mcp_task_fields(task)
    if task.status == "completed" and task.result is not None:
        shown["result"] = task.result
    elif task.status == "failed" and task.error is not None:
        shown["error"] = task.error
    elif task.status == "input_required":
        answered = task.input_responses or {}
        asked = task.input_requests or {}
        shown["inputRequests"] = {k: v for k, v in asked.items() if k not in answered}
    return shown


@dataclass(frozen=True, slots=True)
class InputAnswer(Record):
    """The task after the requester's answers, and the keys it took (the others were
    ignored: not asked in this round, or answered already)."""

    task: Task
    accepted: tuple[str, ...]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> InputAnswer:
        """Read an input response."""
        accepted = checked(body["accepted"], "accepted", list)
        return cls(task=Task.from_json(body), accepted=tuple(str(key) for key in accepted))


@dataclass(frozen=True, slots=True)
class TaskAppend(Record):
    """The ids of a task's appended progress events, and the worker's lease after it."""

    task_id: str
    attempt: int
    generation: str
    event_ids: tuple[str, ...]
    tail_seq: int
    duplicate: bool
    lease_expires_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEventsPage(EventPage):
    """A page of the current attempt's events: an `EventPage` of the attempt's generation,
    with the task and the attempt it belongs to.

    A reader that sees `attempt` change (or `superseded`) discards what it read and starts
    over at `after=0`: the new attempt is a new run, never spliced onto the old one.
    """

    task_id: str
    attempt: int
