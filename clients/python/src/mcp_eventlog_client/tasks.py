"""The task API as typed async calls: the record of MCP's tasks extension, kept in the log.

```python
from mcp_eventlog_client.tasks import TaskClient

async with TaskClient("http://127.0.0.1:8080") as tasks:
    task = await tasks.create(principal="alice", ttl_ms=600_000)   # durable once answered
    await tasks.append(task.task_id, task.attempt, [NewEvent('{"progress": 50}', "progress")])
    await tasks.set_status(task.task_id, task.attempt, "completed", result={"content": []})
    seen = await tasks.get(task.task_id, principal="alice")        # from any replica
```

Two parties call it (docs/tasks.md): the *requester* (`get`, `answer`, `cancel`, `events`,
`follow`; bound to the task's `principal`) and the *worker* (`set_status`, `renew`,
`append`, `take_over`; fenced by its `attempt`). Refusals raise the client's error classes
by code: `UnknownTask` (unknown, expired and another principal's task alike), `Superseded`
(a newer attempt took over), `TerminalGeneration` (the task settled: how a worker learns of
a cancel), `UnknownAttempt`, `InvalidTransition`, `ValidationFailed`, `Evicted`, `BeyondTail`.

What is retried is only what is safe to repeat: reads, lease renewals, cancels, answers
(the first answer to a key stands, so a repeat changes nothing) and appends that carry
`first_seq`. Creating a task, taking one over and changing its status are sent once: a
repeat could create a second task, fence the first new attempt, or be refused as a
transition of an already-changed task.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Self, get_args
from urllib.parse import quote

import httpx

from mcp_eventlog_client.connection import RetryPolicy, ServiceConnection
from mcp_eventlog_client.live import Follower, LiveItem
from mcp_eventlog_client.models import NewEvent, StoredEvent, read_answer

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
TASK_STATUSES: frozenset[str] = frozenset(get_args(TaskStatus))


def _segment(value: str) -> str:
    return quote(value, safe="")


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
        shown: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.last_updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            shown["statusMessage"] = self.status_message
        if self.status == "completed" and self.result is not None:
            shown["result"] = self.result
        if self.status == "failed" and self.error is not None:
            shown["error"] = self.error
        if self.status == "input_required":
            answered = self.input_responses or {}
            # Outstanding requests only: an answered key is not asked again.
            shown["inputRequests"] = {
                key: request
                for key, request in (self.input_requests or {}).items()
                if key not in answered
            }
        return shown


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


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


class _TaskFollower(Follower):
    """A live read of a task's events: the stream follower on the task's own route (which
    checks the principal first)."""

    def __init__(
        self,
        connection: ServiceConnection,
        task_id: str,
        principal: str | None,
        last_event_id: str | None,
        *,
        retry: RetryPolicy | None,
        idle_timeout: float,
    ) -> None:
        super().__init__(
            connection, f"task:{task_id}", last_event_id, retry=retry, idle_timeout=idle_timeout
        )
        query = "" if principal is None else f"?principal={_segment(principal)}"
        self._path = f"/v1/tasks/{_segment(task_id)}/live{query}"


def _body(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


class TaskClient:
    """A typed async client for the task API (`/v1/tasks`, scope `writer`).

    Pass `connection` to share one with an `EventLogClient` (`TaskClient(connection=
    log.connection)`; then `aclose` here does not close it), or the same arguments as
    `EventLogClient` (`base_url`, `key`, `http`, `transport`, `timeout`, `retry`).
    """

    def __init__(
        self,
        base_url: str | None = None,
        key: str | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        connection: ServiceConnection | None = None,
    ) -> None:
        self._owned = connection is None
        self.connection = connection or ServiceConnection(
            base_url, key, http=http, transport=transport, timeout=timeout, retry=retry
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the connection pool (unless the connection was given)."""
        if self._owned:
            await self.connection.aclose()

    async def _call(
        self, method: str, path: str, *, json: Any = None, params: Any = None, retry: bool
    ) -> Any:
        return await self.connection.request(method, path, json=json, params=params, retry=retry)

    # ---- requester ----------------------------------------------------------------------

    async def create(
        self,
        *,
        principal: str | None = None,
        ttl_ms: int | None = None,
        poll_interval_ms: int | None = None,
        request: Mapping[str, Any] | None = None,
        lease_seconds: int | None = None,
        producer: str | None = None,
    ) -> Task:
        """A new `working` task (attempt 1), answered once it is durably stored: a `get`
        on any replica finds it. Never retried (a repeat would create a second task)."""
        body = _body(
            principal=principal,
            ttl_ms=ttl_ms,
            poll_interval_ms=poll_interval_ms,
            request=None if request is None else dict(request),
            lease_seconds=lease_seconds,
            producer=producer,
        )
        answer = await self._call("POST", "/v1/tasks", json=body, retry=False)
        return read_answer(Task.from_json, answer)

    async def get(self, task_id: str, *, principal: str | None = None) -> Task:
        """The task; `UnknownTask` for an unknown, expired or another principal's task."""
        params = _body(principal=principal)
        answer = await self._call(
            "GET", f"/v1/tasks/{_segment(task_id)}", params=params, retry=True
        )
        return read_answer(Task.from_json, answer)

    async def answer(
        self,
        task_id: str,
        input_responses: Mapping[str, Any],
        *,
        principal: str | None = None,
    ) -> InputAnswer:
        """Answer the task's input requests by key; `accepted` lists the keys taken.
        `TerminalGeneration` when the task has settled."""
        body = _body(principal=principal, input_responses=dict(input_responses))
        answer = await self._call(
            "POST", f"/v1/tasks/{_segment(task_id)}/input", json=body, retry=True
        )
        return read_answer(InputAnswer.from_json, answer)

    async def cancel(self, task_id: str, *, principal: str | None = None) -> Task:
        """Cancel the task: `cancelled` at once; a task that already settled stays as it is."""
        body = _body(principal=principal)
        answer = await self._call(
            "POST", f"/v1/tasks/{_segment(task_id)}/cancel", json=body, retry=True
        )
        return read_answer(Task.from_json, answer)

    async def events(
        self,
        task_id: str,
        *,
        principal: str | None = None,
        after: int = 0,
        limit: int | None = None,
        wait: float | None = None,
    ) -> TaskEventsPage:
        """The current attempt's events after seq `after` (`wait`: a long-poll, in seconds).
        `Evicted` (its `detail` names the earliest seq) rather than skip any."""
        answer = await self.connection.long_poll(
            f"/v1/tasks/{_segment(task_id)}/events",
            params=_body(principal=principal, after=after, limit=limit),
            wait=wait,
        )
        return read_answer(TaskEventsPage.from_json, answer)

    def follow(
        self,
        task_id: str,
        *,
        principal: str | None = None,
        last_event_id: str | None = None,
        retry: RetryPolicy | None = None,
        idle_timeout: float = 45.0,
    ) -> AsyncGenerator[LiveItem]:
        """Follow the task's events as they are written (see `EventLogClient.follow`): a
        new attempt is a `LiveReset`, a settled task ends with `LiveEnd`."""
        follower = _TaskFollower(
            self.connection,
            task_id,
            principal,
            last_event_id,
            retry=retry,
            idle_timeout=idle_timeout,
        )
        return follower.items()

    # ---- worker -------------------------------------------------------------------------

    async def set_status(
        self,
        task_id: str,
        attempt: int,
        status: TaskStatus,
        *,
        status_message: str | None = None,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        input_requests: Mapping[str, Any] | None = None,
    ) -> Task:
        """Move the task (fenced by `attempt`; renews the lease, ends it when terminal).

        `completed` carries `result`, `failed` `error` (a JSON-RPC error object),
        `input_required` `input_requests`. Sent once (see the module docstring).
        """
        body = _body(
            attempt=attempt,
            status=status,
            status_message=status_message,
            result=None if result is None else dict(result),
            error=None if error is None else dict(error),
            input_requests=None if input_requests is None else dict(input_requests),
        )
        answer = await self._call(
            "POST", f"/v1/tasks/{_segment(task_id)}/status", json=body, retry=False
        )
        return read_answer(Task.from_json, answer)

    async def renew(self, task_id: str, attempt: int, *, status_message: str | None = None) -> Task:
        """Renew the worker's lease (the heartbeat of a worker with nothing else to say);
        the answer carries the task, its `input_responses` included."""
        body = _body(attempt=attempt, status_message=status_message)
        answer = await self._call(
            "POST", f"/v1/tasks/{_segment(task_id)}/lease", json=body, retry=True
        )
        return read_answer(Task.from_json, answer)

    async def append(
        self,
        task_id: str,
        attempt: int,
        events: Sequence[NewEvent],
        *,
        first_seq: int | None = None,
    ) -> TaskAppend:
        """Append progress events of the worker's attempt (renews its lease); retried only
        with `first_seq`, which makes a repeat a verified duplicate."""
        body = _body(attempt=attempt, events=[e.to_json() for e in events], first_seq=first_seq)
        answer = await self._call(
            "POST",
            f"/v1/tasks/{_segment(task_id)}/events",
            json=body,
            retry=first_seq is not None,
        )
        return read_answer(TaskAppend.from_json, answer)

    async def take_over(
        self,
        task_id: str,
        supersedes: int,
        *,
        lease_seconds: int | None = None,
        producer: str | None = None,
    ) -> Task:
        """Start a new attempt, fencing the holder of `supersedes` (`Superseded` when
        another worker took over first). Sent once."""
        body = _body(supersedes=supersedes, lease_seconds=lease_seconds, producer=producer)
        answer = await self._call(
            "POST", f"/v1/tasks/{_segment(task_id)}/attempts", json=body, retry=False
        )
        return read_answer(Task.from_json, answer)
