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

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from mcp_eventlog_client.connection import RetryPolicy, ServiceClient, ServiceConnection
from mcp_eventlog_client.live import Follower, LiveItem
from mcp_eventlog_client.models import NewEvent, read_answer
from mcp_eventlog_client.task_records import (
    TASK_STATUSES,
    TERMINAL_STATUSES,
    InputAnswer,
    Task,
    TaskAppend,
    TaskEventsPage,
    TaskStatus,
)

__all__ = [
    "TASK_STATUSES",
    "TERMINAL_STATUSES",
    "InputAnswer",
    "Task",
    "TaskAppend",
    "TaskClient",
    "TaskEventsPage",
    "TaskStatus",
]

T = TypeVar("T")


def _path(task_id: str) -> str:
    """The task's route, `/v1/tasks/{task_id}` (the id percent-encoded)."""
    return f"/v1/tasks/{quote(task_id, safe='')}"


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
        query = "" if principal is None else f"?principal={quote(principal, safe='')}"
        self._path = f"{_path(task_id)}/live{query}"


def _body(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


class TaskClient(ServiceClient):
    """A typed async client for the task API (`/v1/tasks`, scope `writer`).

    Pass `connection` to share one with an `EventLogClient` (`TaskClient(connection=
    log.connection)`; then `aclose` here does not close it), or the same arguments as
    `EventLogClient` (`base_url`, `key`, `http`, `transport`, `timeout`, `retry`).
    """

    async def _call(
        self,
        reader: Callable[[dict[str, Any]], T],
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Any = None,
        retry: bool,
    ) -> T:
        """Send one request and read its answer with `reader` (see `read_answer`)."""
        answer = await self.connection.request(method, path, json=json, params=params, retry=retry)
        return read_answer(reader, answer)

    async def _post(
        self,
        reader: Callable[[dict[str, Any]], T],
        task_id: str,
        action: str,
        body: dict[str, Any],
        *,
        retry: bool,
    ) -> T:
        """`POST /v1/tasks/{task_id}/{action}` with `body`, its answer read with `reader`."""
        return await self._call(
            reader, "POST", f"{_path(task_id)}/{action}", json=body, retry=retry
        )

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
        return await self._call(Task.from_json, "POST", "/v1/tasks", json=body, retry=False)

    async def get(self, task_id: str, *, principal: str | None = None) -> Task:
        """The task; `UnknownTask` for an unknown, expired or another principal's task."""
        params = _body(principal=principal)
        return await self._call(Task.from_json, "GET", _path(task_id), params=params, retry=True)

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
        return await self._post(InputAnswer.from_json, task_id, "input", body, retry=True)

    async def cancel(self, task_id: str, *, principal: str | None = None) -> Task:
        """Cancel the task: `cancelled` at once; a task that already settled stays as it is."""
        body = _body(principal=principal)
        return await self._post(Task.from_json, task_id, "cancel", body, retry=True)

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
            f"{_path(task_id)}/events",
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
        return await self._post(Task.from_json, task_id, "status", body, retry=False)

    async def renew(self, task_id: str, attempt: int, *, status_message: str | None = None) -> Task:
        """Renew the worker's lease (the heartbeat of a worker with nothing else to say);
        the answer carries the task, its `input_responses` included."""
        body = _body(attempt=attempt, status_message=status_message)
        return await self._post(Task.from_json, task_id, "lease", body, retry=True)

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
        return await self._post(
            TaskAppend.from_json, task_id, "events", body, retry=first_seq is not None
        )

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
        return await self._post(Task.from_json, task_id, "attempts", body, retry=False)
