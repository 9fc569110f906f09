"""The records of the task API (`/v1/tasks`): a task, an input answer, an append's
answer and a page of a task's events, each read from the service's JSON and checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, get_args

from mcp_eventlog_client.models import StoredEvent

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
TASK_STATUSES: frozenset[str] = frozenset(get_args(TaskStatus))


def _req(body: Mapping[str, Any], name: str, *kinds: type) -> Any:
    value = body[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise TypeError(f"{name!r} is {type(value).__name__}")
    return value


def _opt(body: Mapping[str, Any], name: str, *kinds: type) -> Any:
    value = body.get(name)
    return None if value is None else _req(body, name, *kinds)


def _time(body: Mapping[str, Any], name: str) -> datetime:
    return datetime.fromisoformat(_req(body, name, str))


def _opt_time(body: Mapping[str, Any], name: str) -> datetime | None:
    value = _opt(body, name, str)
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True, slots=True)
class Task:
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

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Task:
        """Read a task object of the contract."""
        status = _req(body, "status", str)
        if status not in TASK_STATUSES:
            raise ValueError(f"'status' is {status!r}")
        return cls(
            task_id=_req(body, "task_id", str),
            status=status,
            status_message=_opt(body, "status_message", str),
            created_at=_time(body, "created_at"),
            last_updated_at=_time(body, "last_updated_at"),
            ttl_ms=_req(body, "ttl_ms", int),
            poll_interval_ms=_req(body, "poll_interval_ms", int),
            attempt=_req(body, "attempt", int),
            generation=_req(body, "generation", str),
            lease_expires_at=_opt_time(body, "lease_expires_at"),
            cancel_requested=_req(body, "cancel_requested", bool),
            result=_opt(body, "result", dict),
            error=_opt(body, "error", dict),
            input_requests=_opt(body, "input_requests", dict),
            input_responses=_opt(body, "input_responses", dict),
        )

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
class InputAnswer:
    """The task after the requester's answers, and the keys it took (the others were
    ignored: not asked in this round, or answered already)."""

    task: Task
    accepted: tuple[str, ...]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> InputAnswer:
        """Read an input response."""
        accepted = _req(body, "accepted", list)
        return cls(task=Task.from_json(body), accepted=tuple(str(key) for key in accepted))


@dataclass(frozen=True, slots=True)
class TaskAppend:
    """The ids of a task's appended progress events, and the worker's lease after it."""

    task_id: str
    attempt: int
    generation: str
    event_ids: tuple[str, ...]
    tail_seq: int
    duplicate: bool
    lease_expires_at: datetime | None

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TaskAppend:
        """Read a task append response."""
        return cls(
            task_id=_req(body, "task_id", str),
            attempt=_req(body, "attempt", int),
            generation=_req(body, "generation", str),
            event_ids=tuple(_req({"id": i}, "id", str) for i in _req(body, "event_ids", list)),
            tail_seq=_req(body, "tail_seq", int),
            duplicate=_req(body, "duplicate", bool),
            lease_expires_at=_opt_time(body, "lease_expires_at"),
        )


@dataclass(frozen=True, slots=True)
class TaskEventsPage:
    """A page of the current attempt's events.

    A reader that sees `attempt` change (or `superseded`) discards what it read and starts
    over at `after=0`: the new attempt is a new run, never spliced onto the old one.
    """

    task_id: str
    attempt: int
    generation: str
    events: tuple[StoredEvent, ...]
    next_after: int | None
    head_seq: int
    tail_seq: int
    terminal: bool
    superseded: bool

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TaskEventsPage:
        """Read a task events page."""
        return cls(
            task_id=_req(body, "task_id", str),
            attempt=_req(body, "attempt", int),
            generation=_req(body, "generation", str),
            events=tuple(StoredEvent.from_json(e) for e in _req(body, "events", list)),
            next_after=_opt(body, "next_after", int),
            head_seq=_req(body, "head_seq", int),
            tail_seq=_req(body, "tail_seq", int),
            terminal=_req(body, "terminal", bool),
            superseded=bool(_opt(body, "superseded", bool)),
        )
